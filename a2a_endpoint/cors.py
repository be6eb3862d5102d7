"""The headers a browser client on another origin needs, for django-cors-headers.

A2A requests carry headers of their own, which a preflight must allow, and answers carry
one a script must be allowed to read::

    from corsheaders.defaults import default_headers
    from a2a_endpoint.cors import A2A_REQUEST_HEADERS, A2A_RESPONSE_HEADERS

    CORS_ALLOW_HEADERS = (*default_headers, *A2A_REQUEST_HEADERS)
    CORS_EXPOSE_HEADERS = list(A2A_RESPONSE_HEADERS)

(``authorization`` and ``content-type`` are in django-cors-headers' defaults already.)
"""

#: Sent by A2A clients: the protocol version, extensions, and a resumed stream's last event.
A2A_REQUEST_HEADERS = ("a2a-version", "a2a-extensions", "x-a2a-extensions", "last-event-id")

#: Read by A2A clients: the extensions the server activated; a refusal's challenge and wait.
A2A_RESPONSE_HEADERS = ("A2A-Extensions", "WWW-Authenticate", "Retry-After")
