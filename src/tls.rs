//! Real TLS handshakes over loopback, used to prove trust.
