"""Security: who a request is (authentication) and whether it may do what it asks (ACL authorization).

Kafka's model (KIP-11 ACLs, KIP-290 prefixed patterns): principals ``User:name``; ACLs bind a resource
pattern (Topic, Group, Cluster, TransactionalId; literal or prefixed) to who may or may not do which
operation from which host; a Deny wins; ``super.users`` may do anything.

- :mod:`~lakelog.security.acls`: the ACL model and the authorizer's decision (pure functions);
- :mod:`~lakelog.security.acl_store`: ACLs in ZooKeeper (add, list, remove);
- :mod:`~lakelog.security.acl_cache`: a broker's in-memory copy, kept current by a kazoo ``TreeCache``
  (:mod:`~lakelog.security.followed_tree`, shared with the users' credentials);
- :mod:`~lakelog.security.authorizer`: the broker's decision per request (``authorizer.enabled``);
- :mod:`~lakelog.security.scram`: SCRAM-SHA-512 credentials (RFC 5802), checking a password against one;
- :mod:`~lakelog.security.user_credentials`: users' credentials in ZooKeeper;
- :mod:`~lakelog.security.authentication`: a request's principal from its HTTP credentials
  (``authentication.methods``: none, or basic and/or oauthbearer);
- :mod:`~lakelog.security.oauth`: JWT bearer tokens checked against a JWKS file or URL (PyJWT);
- :mod:`~lakelog.security.errors`: 401 / 40101, 403 / 40301, 400 / 40021 and 40022, 404 / 40412.
"""
