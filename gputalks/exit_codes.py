"""What a `gputalks` command's exit code says (README: "Exit codes"), one home for every command
and for the nightly that reads them."""

EXIT_OK = 0  # every source ok or unchanged
EXIT_PARTIAL = 1  # some source partial or failed: its last good data kept
EXIT_USAGE = 2  # a usage or configuration mistake
EXIT_FAILED = 3  # nothing refreshed, or the build failed: the last good index kept
EXIT_LOCKED = 4  # another refresh holds the index
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGTERM and SIGHUP: 128 + the signal)
