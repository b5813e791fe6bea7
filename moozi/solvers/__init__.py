"""Perfect solvers of board games: opponents and labelled positions that measure playing strength.

`connect_four` wraps the bitbully solver (the `[solvers]` extra); `positions`
reads the bundled labelled positions, which need no solver.
"""
