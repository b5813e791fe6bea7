"""Using a trained agent: `load_agent(run_dir)`, and the ways to play it.

`loading` builds an `Agent` from a run's checkpoint (without importing the
training package); `openspiel_bot` makes it an OpenSpiel bot; `human` plays it
against a person in the terminal; `gtp` speaks the Go Text Protocol for Go
(rules and scoring in `go_rules`).
"""

from moozi.play.trained_agent import Agent, load_agent, resolve_checkpoint

__all__ = ["Agent", "load_agent", "resolve_checkpoint"]
