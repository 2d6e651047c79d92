"""Who is using the console: sign-in (local passwords, OpenID Connect), sessions, CSRF, roles.

The authority matrix (`replenisher.domain.authority`) says who the people are and what each may
do; this package only establishes, for a request, which of them is asking.
"""
