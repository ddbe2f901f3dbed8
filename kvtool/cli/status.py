"""Exit statuses, the same for every command; ``cli/app.py`` is the one place that applies them.

* ``OK`` (0): the command did what was asked.
* ``PROBLEMS`` (1): a check ran and found problems (doctor, check, smoke): a command reports
  this by returning it after printing its report.
* ``USAGE`` (2): bad usage or input. Library code raises ``KvtoolError``; typer's own usage
  errors (an unknown option) exit 2 as well.
"""

OK = 0
PROBLEMS = 1
USAGE = 2
INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT; SIGTERM 143, SIGHUP 129 (128 + signal)
# the output's reader went away (``kvtool check | head``): as shells report a program SIGPIPE
# ended, never 0 (a CI gate piping a FAIL into head must not pass) and never 1 (not a FAIL)
CLOSED_PIPE = 141
