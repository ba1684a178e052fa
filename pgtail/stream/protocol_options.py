"""Which pgoutput protocol version and options to ask the server for.

``max_proto_version`` per server major, and the START_REPLICATION options for a
`StreamConfig`: each option is checked against the server version and the protocol
version it needs, so a user hears which one is missing before the stream starts.
"""

from __future__ import annotations

from pgtail.catalog import ServerInfo
from pgtail.errors import ConfigurationError, ServerCapabilityError
from pgtail.sqlnames import publication_names_option
from pgtail.stream.config import StreamConfig

# Highest pgoutput protocol version per server major (PG10-13: 1, 14: 2, 15: 3, 16+: 4).
_MAX_PROTO = {14: 2, 15: 3}
# Oldest server major for each protocol version.
_PROTO_MIN_MAJOR = {1: 10, 2: 14, 3: 15, 4: 16}


def max_proto_version(major: int) -> int:
    if major >= 16:
        return 4
    return _MAX_PROTO.get(major, 1)


def replication_options(
    config: StreamConfig, server: ServerInfo, publications: tuple[str, ...]
) -> tuple[int, dict[str, str]]:
    major = server.major
    top = max_proto_version(major)
    version = config.proto_version if config.proto_version is not None else top
    if version < 1 or version > 4:
        raise ConfigurationError(f"--proto-version must be 1 to 4, not {version}")
    if version > top:
        raise ServerCapabilityError(
            f"pgoutput protocol version {version} needs PostgreSQL"
            f" {_PROTO_MIN_MAJOR[version]} or later (server is {major})"
        )

    def need(what: str, minimum: int) -> None:
        if major < minimum:
            raise ServerCapabilityError(
                f"{what} needs PostgreSQL {minimum} or later (server is {major})"
            )

    options = {
        "proto_version": str(version),
        "publication_names": publication_names_option(publications),
    }
    if config.binary:
        need("--binary", 14)
        options["binary"] = "true"
    if config.messages:
        need("--messages (or --ops message)", 14)
        options["messages"] = "true"
    if config.streaming != "off":
        need("--streaming", 14)
        if version < 2:
            raise ServerCapabilityError("--streaming needs --proto-version 2 or later")
        if config.streaming == "parallel":
            need("--streaming parallel", 16)
            if version < 4:
                raise ServerCapabilityError("--streaming parallel needs --proto-version 4")
            options["streaming"] = "parallel"
        else:
            options["streaming"] = "on"
    if config.two_phase:
        need("--two-phase", 15)
        if version < 3:
            raise ServerCapabilityError("--two-phase needs --proto-version 3 or later")
        options["two_phase"] = "true"
    if config.origin is not None:
        need("--origin", 16)
        options["origin"] = config.origin
    return version, options
