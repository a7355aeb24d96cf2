"""Credentials never show in repr, str, logs or errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from mm.config import build_config, load_config
from mm.config.jaas import parse_jaas
from mm.config.keys import MASK, is_secret_key, mask_if_secret
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

PRODUCTION = Path(__file__).parent / "data" / "mm2-production.properties"
FILE_SECRETS = ("pr1mary-S3cret", "b4ckup-S3cret", "truststore-pw")


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.jaas.config", True),
        ("A.sasl.jaas.config", True),
        ("A.consumer.sasl.jaas.config", True),
        ("ssl.key.password", True),
        ("ssl.keystore.password", True),
        ("ssl.truststore.password", True),
        ("ssl.keystore.key", True),
        ("basic.auth.user.info", True),
        ("sasl.oauthbearer.client.secret", True),
        ("spark.authenticate.secret", True),
        ("spark.ssl.keyPassword", True),
        ("db.password", True),
        ("bootstrap.servers", False),
        ("ssl.truststore.location", False),
        ("sasl.mechanism", False),
        ("security.protocol", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_mask_if_secret() -> None:
    assert mask_if_secret("a.password", "x") == MASK
    assert mask_if_secret("anything", SecretStr("x")) == MASK
    assert mask_if_secret("a.password", None) is None
    assert mask_if_secret("topics", "x") == "x"


def test_repr_and_str_of_loaded_config_hide_file_secrets() -> None:
    config = load_config(PRODUCTION, env={})
    shown = [repr(config), str(config)]
    for cluster in config.clusters.values():
        shown += [repr(cluster), str(cluster), repr(cluster.client), str(cluster.model_dump())]
    for text in shown:
        for secret in FILE_SECRETS:
            assert secret not in text


def test_free_form_sections_mask_secret_looking_keys() -> None:
    props = {
        "clusters": "A",
        "A.bootstrap.servers": "a:1",
        "spark.ssl.keyPassword": "spark-pw",
        "spark.master": "local[1]",
        "mm.webhook.secret": "hook-secret",
        "legacy.db.password": "db-pw",
    }
    config = build_config(props)
    assert config.spark["spark.ssl.keyPassword"] == "spark-pw"  # passed through untouched
    text = repr(config) + str(config)
    for secret in ("spark-pw", "hook-secret", "db-pw"):
        assert secret not in text
    assert "local[1]" in text


def test_flow_other_keys_masked_in_repr() -> None:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "A->B.producer.override.sasl.jaas.config": 'x required password="flow-pw";',
    }
    flow = build_config(props).flow("A", "B")
    assert "flow-pw" not in repr(flow)


def test_cluster_client_secrets_become_secretstr_even_when_built_directly() -> None:
    from mm.config import ClusterConfig

    cluster = ClusterConfig(
        alias="A", bootstrap_servers="a:1", client={"ssl.key.password": "direct-pw"}
    )
    assert isinstance(cluster.client["ssl.key.password"], SecretStr)
    assert "direct-pw" not in repr(cluster)
    assert cluster.librdkafka()["ssl.key.password"] == "direct-pw"


def test_secrets_not_logged_when_loading() -> None:
    with capture_logs() as logs:
        load_config(PRODUCTION, env={"MM_PRIMARY__SSL_KEY_PASSWORD": "env-pw"})
    text = repr(logs)
    for secret in (*FILE_SECRETS, "env-pw"):
        assert secret not in text


def test_error_from_env_secret_is_masked() -> None:
    env = {"MM_PRIMARY__SASL_JAAS_CONFIG": 'Nope required password="env-pw";'}
    with pytest.raises(ConfigError) as info:
        load_config(PRODUCTION, env=env)
    assert "env-pw" not in str(info.value)
    assert info.value.key == "primary.sasl.jaas.config (from MM_PRIMARY__SASL_JAAS_CONFIG)"


def test_jaas_entry_repr_hides_options_values() -> None:
    entry = parse_jaas('org.x.PlainLoginModule required username="u" password="jaas-pw";')
    assert entry.options["password"] == "jaas-pw"
    assert "jaas-pw" not in repr(entry)
