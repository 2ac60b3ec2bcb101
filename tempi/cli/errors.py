"""The error type for problems the user can fix: printed without a traceback."""


class UserError(Exception):
    pass
