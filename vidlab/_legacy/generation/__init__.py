"""The old top-level name `generation`: an alias of `vidlab.generation` for one more release (a DeprecationWarning says so)."""

from vidlab._areas import alias_old_name

alias_old_name(__name__)
