from .audit import AuditEvent
from .membership import Membership
from .tenant import Tenant

__all__ = ["AuditEvent", "Membership", "Tenant"]
