"""Root of lakelog's error hierarchy: :class:`LakelogError`, the code table, and the errors of no area.

Every error lakelog raises on purpose derives from :class:`LakelogError`. Each class carries what the
HTTP gateway needs to answer it the way Confluent REST Proxy does (``http_status`` and the
``error_code`` = status * 100 + n) and, as aiokafka's errors do, whether a client may retry it
(``retriable``). The classes of each area live in a module beside this one
(:mod:`lakelog.errors.log`, ...), all imported by :mod:`lakelog.errors`.
"""

from __future__ import annotations


#: Response header of every error answer: ``true`` when the same request may succeed later. The body
#: keeps REST Proxy's exact shape (``error_code``, ``message``), so retriability travels beside it.
RETRIABLE_HEADER = "X-Lakelog-Retriable"


#: REST error code -> the class that answers with it (filled as error classes are defined; complete once
#: :mod:`lakelog.errors` is imported, which imports every area; one class a code, checked by
#: tests/test_error_codes.py). Read it through :func:`lakelog.errors.for_code`.
ERROR_CLASSES: dict[int, type["LakelogError"]] = {}


class LakelogError(Exception):
    """Base class of all lakelog errors.

    Attributes:
        http_status: HTTP status the gateway answers with. Default: 500.
        error_code: REST Proxy style error code, ``http_status * 100 + n``. Default: 50001.
        retriable: True when the same request may succeed if sent again later. Default: False.
    """

    http_status: int = 500
    error_code: int = 50001
    retriable: bool = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("error_code")
        if isinstance(code, int):  # a class that names its own code answers for it
            ERROR_CLASSES.setdefault(code, cls)

    @classmethod
    def from_body(cls, message: str, body: dict) -> "LakelogError":
        """Rebuild this error from a REST error body ``{"error_code", "message", ...}`` (client side).

        Subclasses whose body carries more fields (``NotLeaderError``'s ``leader_url``) override this.
        """
        err = cls.__new__(cls)
        LakelogError.__init__(err, message)
        return err

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__.strip().splitlines()[0])

    @property
    def message(self) -> str:
        """The human-readable message, as sent in the ``message`` field of an error body."""
        return str(self.args[0])

    def to_body(self) -> dict:
        """The REST Proxy error body: ``{"error_code": int, "message": str}``."""
        return {"error_code": self.error_code, "message": self.message}


class ConfigError(LakelogError):
    """A configuration value is missing or invalid."""

    http_status = 400
    error_code = 40003


class InternalError(LakelogError):
    """An unexpected failure (a bug) while answering: the gateway answers any exception that is not a
    :class:`LakelogError` with this class's status and code. 500 / 50001, not retriable."""

    http_status = 500
    error_code = 50001
