"""Typed, frozen models of a MirrorMaker 2 configuration.

``MirrorConfig`` holds the clusters, every declared ``X->Y`` flow, the ``spark.*``
and ``mm.*`` settings and the state directory. Build it with
:func:`mm.config.load_config`, which reads ``connect-mirror-maker.properties``
unchanged and reports every invalid value as a ``ConfigError`` naming the key as
written in the file.

Each ``FlowConfig`` field carries the MM2 property it comes from in
``json_schema_extra["property"]`` (``deprecated`` names MM2's older alias).
Defaults that differ from MM2 say so in their description.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mm.config.keys import is_secret_key, mask_if_secret
from mm.config.librdkafka import (
    Role,
    kafka_python_from_librdkafka,
    role_properties,
    to_librdkafka,
)
from mm.errors import ConfigError
from mm.kafka.profile import PROFILES, BrokerProfile

if TYPE_CHECKING:
    from mm_client.policy import ReplicationPolicy

__all__ = ["DEFAULT_POLICY_CLASS", "ClusterConfig", "FlowConfig", "MirrorConfig"]

DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
# Accepted while mm_client.policy is not importable; once it is, it decides.
_KNOWN_POLICIES = (
    DEFAULT_POLICY_CLASS,
    IDENTITY_POLICY_CLASS,
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
)


def _invalid(expected: str) -> PydanticCustomError:
    # the loader reads ctx["expected"] into ConfigError.expected
    return PydanticCustomError("mm_config", "{expected}", {"expected": expected})


# --- value parsers: MM2's string values -> typed values ---------------------------


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _invalid("true or false")


def _int_parser(minimum: int, expected: str, *, forbid: int | None = None) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise _invalid(expected)
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            value = int(value)
        if not isinstance(value, int) or value < minimum or value == forbid:
            raise _invalid(expected)
        return value

    return parse


def _parse_regex_list(value: Any) -> tuple[str, ...]:
    """MM2 list syntax: comma-separated, items trimmed, empty items dropped."""
    items = value.split(",") if isinstance(value, str) else list(value)
    patterns = tuple(str(p).strip() for p in items if str(p).strip())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _invalid(
                f"a comma-separated list of regular expressions ({pattern!r}: {exc})"
            ) from None
    return patterns


def _parse_choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise _invalid(" or ".join(repr(c) for c in choices))
        return text

    return parse


def _parse_optional_topic(value: Any) -> str | None:
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    if len(text) > 249 or not re.fullmatch(r"[A-Za-z0-9._-]+", text):
        raise _invalid("a Kafka topic name (letters, digits, '.', '_', '-'; at most 249)")
    return text


def _parse_bootstrap(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    servers = tuple(str(s).strip() for s in items if str(s).strip())
    expected = "a comma-separated list of host:port (port 1-65535)"
    if not servers:
        raise _invalid(expected)
    for server in servers:
        m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+):(\d{1,5})", server)
        if not m or not 0 < int(m[2]) < 65536:
            raise _invalid(f"{expected}; {server!r} is not")
    return servers


Bool = Annotated[bool, BeforeValidator(_parse_bool)]
Seconds = Annotated[
    int,
    BeforeValidator(
        _int_parser(1, "a positive integer number of seconds (turn it off with its .enabled key)")
    ),
]
NonNegative = Annotated[int, BeforeValidator(_int_parser(0, "a non-negative integer"))]
ReplicationFactor = Annotated[
    int,
    BeforeValidator(
        _int_parser(
            -1, "-1 (the broker's default.replication.factor) or a positive integer", forbid=0
        )
    ),
]
RegexList = Annotated[tuple[str, ...], BeforeValidator(_parse_regex_list)]


def _prop(key: str, default: Any, description: str, *, deprecated: str | None = None) -> Any:
    extra: dict[str, Any] = {"property": key}
    if deprecated:
        extra["deprecated"] = deprecated
    return Field(default, description=description, json_schema_extra=extra)


def _mask_dict(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: mask_if_secret(k, v) for k, v in value.items()}
    return value


class _MaskedRepr:
    """Masks secret-looking keys of free-form dict fields in repr/str."""

    _masked_fields: ClassVar[tuple[str, ...]] = ()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():  # type: ignore[misc]
            yield name, _mask_dict(value) if name in self._masked_fields else value


# --- clusters ---------------------------------------------------------------------


class ClusterConfig(BaseModel):
    """One Kafka cluster named in ``clusters``, from its ``<alias>.*`` keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str = Field(description="Cluster alias as listed in `clusters`.")
    bootstrap_servers: Annotated[tuple[str, ...], BeforeValidator(_parse_bootstrap)] = Field(
        description="`<alias>.bootstrap.servers`: host:port pairs, at least one."
    )
    client: dict[str, str | SecretStr] = Field(
        default_factory=dict,
        description="Every other `<alias>.<property>` (Java client names, without the alias; "
        "`consumer.`/`producer.`/`admin.` prefixes kept), plus the top-level `security.protocol`, "
        "`ssl.*` and `sasl.*` the cluster does not set itself. Credentials are SecretStr.",
    )
    inherited: frozenset[str] = Field(
        default_factory=frozenset,
        description="Keys of `client` that came from top-level settings (for error messages).",
    )
    broker_profile: Literal["kafka", "embedded"] = Field(
        default="kafka",
        description="`<alias>.mm.broker.profile` (else `mm.broker.profile`): what the cluster's "
        "broker is where brokers differ (mm.kafka.profile).",
    )

    @field_validator("client", mode="after")
    @classmethod
    def _secrets_hidden(cls, client: dict[str, str | SecretStr]) -> dict[str, str | SecretStr]:
        return {
            k: SecretStr(v) if isinstance(v, str) and is_secret_key(k) else v
            for k, v in client.items()
        }

    @property
    def profile(self) -> BrokerProfile:
        """The cluster's :class:`~mm.kafka.profile.BrokerProfile`."""
        return PROFILES[self.broker_profile]

    def client_properties(self, role: Role = "admin") -> dict[str, str | SecretStr]:
        """Java client properties for ``role``: common ones overlaid with role-prefixed ones."""
        return {
            "bootstrap.servers": ",".join(self.bootstrap_servers),
            **role_properties(self.client, role),
        }

    def librdkafka(self, role: Role = "admin") -> dict[str, str]:
        """librdkafka (confluent-kafka) settings for ``role``; see ``mm.config.librdkafka``.

        The result holds plaintext credentials: pass it to the client, never log it.
        """
        conf, _dropped = to_librdkafka(
            self.client_properties(role), role, key_name=self.key_namer(role)
        )
        return conf

    def kafka_python(self, role: Role = "admin") -> dict[str, Any]:
        """Connection and security keyword arguments for kafka-python clients."""
        return kafka_python_from_librdkafka(self.librdkafka(role))

    def key_namer(self, role: Role) -> Callable[[str], str]:
        """Maps a client property name to the key the user wrote, for error messages."""

        def name(prop: str) -> str:
            if f"{role}.{prop}" in self.client:
                return f"{self.alias}.{role}.{prop}"
            if prop in self.inherited:
                return prop
            return f"{self.alias}.{prop}"

        return name


# --- flows ------------------------------------------------------------------------


class FlowConfig(_MaskedRepr, BaseModel):
    """One replication flow ``source->target``; ``source->target.<key>`` beats ``<key>``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    _masked_fields: ClassVar[tuple[str, ...]] = ("other",)

    source: str = Field(description="Source cluster alias.")
    target: str = Field(description="Target cluster alias.")
    enabled: Bool = _prop(
        "enabled", False, "`X->Y.enabled`; as in MM2 a flow replicates only when set to true."
    )
    topics: RegexList = _prop("topics", (".*",), "Topics to mirror: regexes, full match.")
    topics_exclude: RegexList = _prop(
        "topics.exclude",
        (r".*[\-\.]internal", r".*\.replica", "__.*"),
        "Topics never mirrored; beats `topics`.",
        deprecated="topics.blacklist",
    )
    groups: RegexList = _prop("groups", (".*",), "Consumer groups to checkpoint: regexes.")
    groups_exclude: RegexList = _prop(
        "groups.exclude",
        ("console-consumer-.*", "connect-.*", "__.*"),
        "Consumer groups never checkpointed; beats `groups`.",
        deprecated="groups.blacklist",
    )
    replication_policy_separator: str = _prop(
        "replication.policy.separator", ".", "Separator between alias and topic in remote names."
    )
    replication_policy_internal_topic_separator_enabled: Bool = _prop(
        "replication.policy.internal.topic.separator.enabled",
        True,
        "Internal topics (offset syncs, checkpoints) use the separator too (as MM2).",
    )
    replication_policy_class: str = _prop(
        "replication.policy.class",
        DEFAULT_POLICY_CLASS,
        "MM2's DefaultReplicationPolicy or IdentityReplicationPolicy (class or simple name).",
    )
    offset_lag_max: NonNegative = _prop(
        "offset.lag.max", 100, "Max downstream drift before an offset sync is written."
    )
    emit_checkpoints_enabled: Bool = _prop("emit.checkpoints.enabled", True, "Emit checkpoints.")
    emit_checkpoints_interval_seconds: Seconds = _prop(
        "emit.checkpoints.interval.seconds",
        5,
        "Checkpoint period. Ours 5 (MM2: 60): fresher translated offsets at failover.",
    )
    emit_heartbeats_enabled: Bool = _prop("emit.heartbeats.enabled", True, "Emit heartbeats.")
    emit_heartbeats_interval_seconds: Seconds = _prop(
        "emit.heartbeats.interval.seconds", 1, "Heartbeat period (as MM2)."
    )
    sync_group_offsets_enabled: Bool = _prop(
        "sync.group.offsets.enabled",
        False,
        "Commit translated offsets into idle groups on the target (as MM2, off).",
    )
    sync_group_offsets_interval_seconds: Seconds = _prop(
        "sync.group.offsets.interval.seconds",
        5,
        "Group offset sync period. Ours 5 (MM2: 60), matching the checkpoint period.",
    )
    offset_syncs_topic_location: Annotated[
        Literal["source", "target"], BeforeValidator(_parse_choice("source", "target"))
    ] = _prop("offset-syncs.topic.location", "source", "Cluster holding the offset-syncs topic.")
    refresh_topics_enabled: Bool = _prop("refresh.topics.enabled", True, "Look for new topics.")
    refresh_topics_interval_seconds: Seconds = _prop(
        "refresh.topics.interval.seconds",
        10,
        "Topic discovery period. Ours 10 (MM2: 600): a new topic is mirrored within seconds.",
    )
    refresh_groups_enabled: Bool = _prop("refresh.groups.enabled", True, "Look for new groups.")
    refresh_groups_interval_seconds: Seconds = _prop(
        "refresh.groups.interval.seconds",
        10,
        "Group discovery period. Ours 10 (MM2: 600): new groups get checkpoints within seconds.",
    )
    sync_topic_configs_enabled: Bool = _prop(
        "sync.topic.configs.enabled", True, "Copy topic configs to remote topics."
    )
    sync_topic_configs_interval_seconds: Seconds = _prop(
        "sync.topic.configs.interval.seconds",
        600,
        "Topic config sync period (as MM2); checked at each topic refresh.",
    )
    sync_topic_acls_enabled: Bool = _prop(
        "sync.topic.acls.enabled",
        True,
        "Copy the source topics' ACLs to the remote topics (as MM2; docs/security.md).",
    )
    sync_topic_acls_interval_seconds: Seconds = _prop(
        "sync.topic.acls.interval.seconds", 600, "Topic ACL sync period (as MM2)."
    )
    config_properties_exclude: RegexList = _prop(
        "config.properties.exclude",
        (
            r"follower\.replication\.throttled\.replicas",
            r"leader\.replication\.throttled\.replicas",
            r"message\.timestamp\.difference\.max\.ms",
            r"message\.timestamp\.type",
            r"unclean\.leader\.election\.enable",
            r"min\.insync\.replicas",
        ),
        "Topic config properties never copied (as MM2).",
        deprecated="config.properties.blacklist",
    )
    use_defaults_from: Annotated[
        Literal["target", "source"], BeforeValidator(_parse_choice("target", "source"))
    ] = _prop(
        "use.defaults.from",
        "target",
        "Whose defaults remote topics get (KIP-894, as MM2): 'target' copies only configs "
        "not at their default on the source; 'source' copies the source's defaults too.",
    )
    replication_factor: ReplicationFactor = _prop(
        "replication.factor",
        -1,
        "Replication factor of created remote topics. Ours -1 = broker default (MM2: 2, "
        "which fails on single-broker clusters).",
    )
    checkpoints_topic_replication_factor: ReplicationFactor = _prop(
        "checkpoints.topic.replication.factor",
        -1,
        "Replication factor of the checkpoints topic. Ours -1 = broker default (MM2: 3).",
    )
    heartbeats_topic_replication_factor: ReplicationFactor = _prop(
        "heartbeats.topic.replication.factor",
        -1,
        "Replication factor of the heartbeats topic. Ours -1 = broker default (MM2: 3).",
    )
    offset_syncs_topic_replication_factor: ReplicationFactor = _prop(
        "offset-syncs.topic.replication.factor",
        -1,
        "Replication factor of the offset-syncs topic. Ours -1 = broker default (MM2: 3).",
    )
    errors_tolerance: Annotated[
        Literal["none", "all"], BeforeValidator(_parse_choice("none", "all"))
    ] = _prop(
        "errors.tolerance",
        "none",
        "'none': a record that cannot be mirrored stops the flow; 'all': skip it "
        "(to the dead letter topic when one is named).",
    )
    errors_deadletterqueue_topic_name: Annotated[
        str | None, BeforeValidator(_parse_optional_topic)
    ] = _prop(
        "errors.deadletterqueue.topic.name", None, "Dead letter topic (on the target) or none."
    )
    other: dict[str, str] = Field(
        default_factory=dict,
        description="Flow-prefixed keys not modelled here (e.g. tasks.max), prefix removed.",
    )

    _topics: tuple[re.Pattern[str], ...] = PrivateAttr(default=())
    _topics_exclude: tuple[re.Pattern[str], ...] = PrivateAttr(default=())
    _groups: tuple[re.Pattern[str], ...] = PrivateAttr(default=())
    _groups_exclude: tuple[re.Pattern[str], ...] = PrivateAttr(default=())
    _config_exclude: tuple[re.Pattern[str], ...] = PrivateAttr(default=())

    @field_validator("replication_policy_separator", mode="after")
    @classmethod
    def _separator_not_empty(cls, value: str) -> str:
        if not value:
            raise _invalid("a non-empty separator, e.g. '.'")
        return value

    @field_validator("replication_policy_class", mode="after")
    @classmethod
    def _policy_known(cls, value: str, info: ValidationInfo) -> str:
        value = value.strip()
        separator = info.data.get("replication_policy_separator")
        internal = info.data.get("replication_policy_internal_topic_separator_enabled")
        if separator is not None and internal is not None:  # else that error is reported
            _check_policy(value, separator, info.data.get("source"), internal)
        return value

    def model_post_init(self, context: Any, /) -> None:
        # MM2 matches whole names (Matcher.matches), hence fullmatch
        self._topics = tuple(re.compile(p) for p in self.topics)
        self._topics_exclude = tuple(re.compile(p) for p in self.topics_exclude)
        self._groups = tuple(re.compile(p) for p in self.groups)
        self._groups_exclude = tuple(re.compile(p) for p in self.groups_exclude)
        self._config_exclude = tuple(re.compile(p) for p in self.config_properties_exclude)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def topic_filter(self, topic: str) -> bool:
        """True when ``topic`` should be mirrored (included and not excluded)."""
        return _any_full(self._topics, topic) and not _any_full(self._topics_exclude, topic)

    def group_filter(self, group: str) -> bool:
        """True when consumer group ``group`` should be checkpointed."""
        return _any_full(self._groups, group) and not _any_full(self._groups_exclude, group)

    def config_property_filter(self, prop: str) -> bool:
        """True when topic config property ``prop`` should be copied to the remote topic."""
        return not _any_full(self._config_exclude, prop)

    def policy(self) -> ReplicationPolicy:
        """The mm_client replication policy naming this flow's remote topics."""
        from mm_client.policy import policy_from_class_name

        return policy_from_class_name(
            self.replication_policy_class,
            self.replication_policy_separator,
            self.source,
            internal_topic_separator_enabled=self.replication_policy_internal_topic_separator_enabled,
        )


def _any_full(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def _check_policy(class_name: str, separator: str, source: str | None, internal: bool) -> None:
    try:
        from mm_client import policy as mm_policy
    except ImportError:  # the client package predates policies: accept MM2's two
        if class_name not in _KNOWN_POLICIES:
            raise _invalid("one of " + ", ".join(_KNOWN_POLICIES)) from None
        return
    try:
        mm_policy.policy_from_class_name(
            class_name, separator, source, internal_topic_separator_enabled=internal
        )
    except ValueError:
        accepted = getattr(mm_policy, "ACCEPTED_POLICY_CLASS_NAMES", _KNOWN_POLICIES)
        raise _invalid("one of " + ", ".join(accepted)) from None


# --- the whole file -----------------------------------------------------------------


class MirrorConfig(_MaskedRepr, BaseSettings):
    """A whole ``connect-mirror-maker.properties`` (plus ``MM_*`` overrides), validated."""

    # Environment overrides are applied to the raw properties by load_config: the
    # key space (aliases, flows) is dynamic, so pydantic-settings' field-based env
    # source cannot express it. Constructing this model reads no environment.
    model_config = SettingsConfigDict(frozen=True, extra="forbid")
    _masked_fields: ClassVar[tuple[str, ...]] = ("spark", "mm", "backup", "other")

    clusters: dict[str, ClusterConfig] = Field(description="Clusters by alias (`clusters`).")
    flows: tuple[FlowConfig, ...] = Field(
        default=(),
        description="Every flow with at least one `X->Y.*` key, enabled or not, in file order.",
    )
    spark: dict[str, str] = Field(
        default_factory=dict, description="Every `spark.*` key, verbatim, for the SparkSession."
    )
    state_dir: Path = Field(
        default_factory=lambda: Path.cwd() / "mm-state",
        description="`mm.state.dir`: Spark checkpoints and job state; relative paths are "
        "resolved against the working directory at load time.",
    )
    mm: dict[str, str] = Field(
        default_factory=dict,
        description="Other `mm.*` keys with the `mm.` prefix removed (e.g. alert thresholds).",
    )
    backup: dict[str, str] = Field(
        default_factory=dict,
        description="`backup.*` keys with the `backup.` prefix removed, raw; `mm backup` "
        "parses them (mm.backup.settings).",
    )
    other: dict[str, str] = Field(
        default_factory=dict,
        description="Top-level keys that are not ours nor MM2's flow keys; kept, not used.",
    )
    config_path: Path | None = Field(default=None, description="File the config came from.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Every known `mm.*` setting, typed (mm.config.settings); defaults where unset.",
    )

    def setting(self, key: str) -> Any:
        """The typed value of setting ``mm.<key>`` (see :data:`mm.config.settings.SETTINGS`)."""
        from mm.config.settings import SETTINGS

        if key in self.settings:
            return self.settings[key]
        return SETTINGS[key].default  # KeyError for a setting nobody defined

    def enabled_flows(self) -> list[FlowConfig]:
        return [f for f in self.flows if f.enabled]

    def job_flows(self, flows: list[FlowConfig] | None = None) -> list[FlowConfig]:
        """``flows`` (None: the enabled ones); a job refuses to run with none."""
        chosen = flows if flows is not None else self.enabled_flows()
        if not chosen:
            raise ConfigError(
                "clusters",
                ",".join(self.clusters),
                "at least one enabled flow (e.g. A->B.enabled = true)",
            )
        return chosen

    def flow(self, source: str, target: str) -> FlowConfig:
        """The declared flow ``source->target``; KeyError if the file has none."""
        for f in self.flows:
            if f.source == source and f.target == target:
                return f
        raise KeyError(f"{source}->{target}")

    def cluster(self, alias: str) -> ClusterConfig:
        return self.clusters[alias]
