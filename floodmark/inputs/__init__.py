"""Reading what comes from outside: the hostile-input discipline every reader shares.

A history, an event file, a schedule, a configuration or a results file may come from
another tool, another version, a killed writer or a hand that meant harm. Every reader of
floodmark takes its bytes and its parsed values through this package, so that each gets the
same answers to the same questions: where the bytes come from when a path is a pipe
(``sources``), what a parsed JSON or EDN value may be before it is held (``plain_values``),
how JSON is parsed both fast and exactly (``fast_json``), how YAML is loaded without letting
its nesting take the process down (``safe_yaml``), and which last line a killed writer may
have cut short (``torn_lines``). A path the user names for output is as hostile (it may be
the input itself, a directory or a device): ``output_paths`` writes there without losing
anything. It sits just above the error types and below the contracts that use it.
"""
