"""A broker's "not authorized" answers, told as the one ACL that is missing.

aiokafka raises one error class per resource type (topic, group, transactional id,
cluster), carrying the names it was refused. `denied` turns such an error, at the call
that knows which operation it attempted, into an `AuthorizationError` naming the principal,
the operation and that one resource, with the kafka-acls command that grants it.
"""

from __future__ import annotations

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    for_code,
)

from framework.errors import AuthorizationError
from framework.systems.kafka.options import KafkaOptions

__all__ = ["DENIALS", "denial_code", "denied"]

DENIALS: tuple[type[KafkaError], ...] = (
    TopicAuthorizationFailedError, GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailed)
"""aiokafka's "not authorized" errors."""

_RESOURCE = {
    TopicAuthorizationFailedError: ("TOPIC", "topic", "--topic"),
    GroupAuthorizationFailedError: ("GROUP", "group", "--group"),
    TransactionalIdAuthorizationFailed: ("TRANSACTIONAL_ID", "transactional id",
                                         "--transactional-id"),
    ClusterAuthorizationFailedError: ("CLUSTER", "the cluster", "--cluster"),
}


def denial_code(code: int) -> type[KafkaError] | None:
    """The denial class of a response's error code (29–31, 53), else None."""
    error = for_code(code)
    return error if error in _RESOURCE else None


def denied(error: BaseException, operation: str, resource: str, *, system: str,
           bootstrap: str, options: KafkaOptions, doing: str) -> AuthorizationError | None:
    """``error`` (or what caused it) as the missing ACL: ``operation`` on ``resource`` (a
    topic, group or transactional id name; the error's own name wins when it carries one),
    for ``doing`` (what sampan was doing, for people); None when it is no denial."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, DENIALS):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    return denial(type(cause), operation, _named(cause) or resource, system=system,
                  bootstrap=bootstrap, options=options, doing=doing)


def denial(kind: type[KafkaError], operation: str, resource: str, *, system: str,
           bootstrap: str, options: KafkaOptions, doing: str) -> AuthorizationError:
    """The `AuthorizationError` of a denial of class ``kind`` (see `denied`)."""
    resource_type, noun, flag = _RESOURCE.get(kind, ("TOPIC", "topic", "--topic"))
    principal = options.security.principal()
    what = noun if resource_type == "CLUSTER" else f"{noun} {resource!r}"
    target = flag if resource_type == "CLUSTER" else f"{flag} '{resource}'"
    camel = "".join(part.capitalize() for part in operation.split("_"))
    grant_to = principal if principal.startswith("User:") else "<principal>"
    if operation == "DESCRIBE" and resource_type == "TOPIC":
        fix = ("Kafka hides a topic its principal may not describe; READ or WRITE on it "
               "grant DESCRIBE too — `sampan acls JOB` lists which of them the job needs")
    else:
        fix = (f"grant it: kafka-acls.sh --bootstrap-server {bootstrap} --add "
               f"--allow-principal '{grant_to}' --operation {camel} {target} (`sampan acls "
               "JOB` lists every ACL the job needs)")
    return AuthorizationError(
        f"Kafka at {bootstrap} (system {system!r}): not authorized — {principal} may not "
        f"{operation} {what} ({doing}); {fix}",
        operation=operation, resource=f"{resource_type}:{resource}")


def _named(error: BaseException) -> str | None:
    """The one resource name an aiokafka denial carries, if it carries exactly one."""
    names: set[str] = set()
    for arg in error.args:
        if isinstance(arg, str) and arg and " " not in arg:
            names.add(arg)
        elif isinstance(arg, list | set | tuple | frozenset):
            names |= {a for a in arg if isinstance(a, str)}
    return next(iter(names)) if len(names) == 1 else None
