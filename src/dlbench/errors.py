"""The one exception type that means "the user asked for something wrong"."""


class UserError(Exception):
    """A bad config, name, value or file given by the user.

    The CLI prints its message as one line and exits with code 2, without a
    traceback; anything else escaping is a dlbench bug and keeps its traceback.
    """
