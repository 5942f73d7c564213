# floodmark/broker: one broker machine. The container's main process only keeps the machine
# alive; the harness starts the broker in it (`docker exec`), signals it, kills and restarts
# it, so a restarted broker keeps its address, its data and any partition rules.
# Build context: prepared by floodmark/backends/images.py (the reference, the layers below it, and
# libfaketime).
ARG BASE=floodmark/base
FROM ${BASE}

# A stock Debian/Ubuntu base (BASE=debian:bookworm-slim) lacks what floodmark/base has.
RUN if ! (command -v iptables && command -v setpriv && python3 -c "import kazoo") >/dev/null 2>&1; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-kazoo python3-yaml iptables iproute2 procps util-linux \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# The broker runs as this unprivileged user, so permission faults on its log dirs bite.
RUN groupadd --system --gid 10001 broker \
 && useradd --system --uid 10001 --gid broker --home-dir /var/lib/floodmark --no-create-home broker \
 && mkdir -p /var/lib/floodmark/data /etc/floodmark \
 && chown -R broker:broker /var/lib/floodmark \
 && echo "+0 x1" > /etc/floodmark/faketime

COPY libfaketime.so.1 /usr/local/lib/floodmark/libfaketime.so.1
COPY floodmark /opt/floodmark/floodmark

ENV PYTHONPATH=/opt/floodmark PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
WORKDIR /var/lib/floodmark
CMD ["sleep", "infinity"]
