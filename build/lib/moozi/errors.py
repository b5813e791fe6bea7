"""Errors that reach users. The CLI prints them as one line and exits with code 2."""


class MooziError(Exception):
    """A problem the user can fix (bad game name, bad config key, bad input).

    The message must fit on one line and say what was wrong and what is allowed.
    """


class UnknownGameError(MooziError):
    """The game name names no known library, game or preset."""


class UnsupportedGameError(MooziError):
    """The library knows the game, but moozi cannot play it (and the message says why)."""


class IllegalActionError(MooziError):
    """An action outside the legal set was given to an environment."""


class SupplyExhaustedError(MooziError):
    """The trajectory supply of a mock environment ran out."""
