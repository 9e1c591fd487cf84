"""The old top-level name `understanding`: an alias of `vidlab.understanding` for one more release (a DeprecationWarning says so)."""

from vidlab._areas import alias_old_name

alias_old_name(__name__)
