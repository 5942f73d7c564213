"""History formats: our JSONL, Jepsen's EDN (vectors or streams of op maps, Porcupine's
one-map-per-line files) and Jepsen's 2014 text logs, recognised by content, read into
:class:`floodmark.contracts.history.Op`, and our histories written back as EDN for Jepsen's tools."""
