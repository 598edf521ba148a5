"""Users, password hashes, authentication and permission decisions (no Proton)."""
