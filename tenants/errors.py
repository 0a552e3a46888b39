"""Domain errors of the tenants services. The API maps each to an HTTP status (api/errors.py)."""


class DomainError(Exception):
    code = "invalid_request"

    def __init__(self, message: str, *, details=None):
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(DomainError):
    code = "invalid_request"


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class Forbidden(DomainError):
    code = "forbidden"


class Unavailable(DomainError):
    """A dependency (a model server, a replica) cannot do its part now; retrying later may work."""

    code = "unavailable"


class QuotaExceeded(DomainError):
    """The organization has used what it is allowed; retrying will not help until it frees some."""

    code = "storage_quota_exceeded"
