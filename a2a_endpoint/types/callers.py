"""Who is calling: the ``Caller`` every request runs as, and its well-known values."""

from __future__ import annotations

import msgspec


class Caller(msgspec.Struct, frozen=True):
    """Who is calling: every task belongs to its ``owner`` within a tenant (A2A §13.1).

    ``tenant`` is the caller's own tenant, used when a request names none; ``tenants`` are
    the other tenants it may name in a request's ``tenant`` field (``"*"``: any, for a
    trusted gateway that checked the tenant itself). Any other tenant is answered as if
    nothing were there (TaskNotFoundError). ``authenticated`` is False only
    for callers nobody vouched for (GetExtendedAgentCard refuses them).
    """

    owner: str
    tenant: str = ""
    tenants: frozenset[str] = frozenset()
    authenticated: bool = True

    def may_use(self, tenant: str) -> bool:
        return tenant == self.tenant or tenant in self.tenants or ANY_TENANT in self.tenants


ANY_TENANT = "*"
ANONYMOUS = Caller(owner="anonymous", authenticated=False)
