"""provider_policy.ProviderPolicy, rule by rule: which model URL and key variable a stream's
``provider`` may name over HTTP. (The HTTP route itself, with real servers:
test_fastapi_provider_policy.py.) No environment variable is read and nothing connects here."""

from __future__ import annotations

import pytest
from steerable_agent_runtime.sidecar.params import ProviderSpec
from steerable_agent_runtime.sidecar.provider_policy import OFFICIAL_KEY_ENVS, ProviderPolicy
from steerable_agent_runtime.sidecar.providers import DEFAULT_BASE_URLS
from steerable_agent_runtime.transport.jsonrpc import NOT_ALLOWED, RpcError


def spec(kind: str = "openai_compat", **fields) -> ProviderSpec:
    return ProviderSpec.model_validate({"kind": kind, "model": "m", **fields})


def refused_field(policy: ProviderPolicy, provider: ProviderSpec) -> str:
    with pytest.raises(RpcError) as caught:
        policy.check(provider)
    assert caught.value.code == NOT_ALLOWED and "\n" not in caught.value.message
    return caught.value.data["field"]


@pytest.mark.parametrize("kind", sorted(DEFAULT_BASE_URLS))
def test_without_configuration_each_kind_may_use_its_official_url_and_its_own_key_variables(kind):
    policy = ProviderPolicy.only()
    official = DEFAULT_BASE_URLS[kind]
    assert policy.check(spec(kind)) == spec(kind)
    assert policy.check(spec(kind, baseUrl=official + "/")).base_url is None  # the official URL, however spelt
    host = official.split("/")[2]
    assert policy.check(spec(kind, baseUrl=official.replace(host, host.upper()))).base_url is None
    for name in OFFICIAL_KEY_ENVS[kind]:
        assert policy.check(spec(kind, apiKeyEnv=name)).api_key_env == name
        assert policy.check(spec(kind, baseUrl=official, apiKeyEnv=name)).api_key_env == name
    others = {n for k, names in OFFICIAL_KEY_ENVS.items() if k != kind for n in names} - set(OFFICIAL_KEY_ENVS[kind])
    for name in sorted(others) + ["SECRET_DB_URL", "AWS_SECRET_ACCESS_KEY", "openai_api_key"]:
        assert refused_field(policy, spec(kind, apiKeyEnv=name)) == "provider.apiKeyEnv", name
    for url in ("http://127.0.0.1:8000/v1", "http://169.254.169.254", official + "/../x", official + ":443",
                official.replace("https://", "http://"), official.replace("://", "://user@")):
        assert refused_field(policy, spec(kind, baseUrl=url)) == "provider.baseUrl", url


def test_the_official_key_variables_are_the_documented_ones():
    assert OFFICIAL_KEY_ENVS == {"openai_compat": ("OPENAI_API_KEY",), "openai_responses": ("OPENAI_API_KEY",),
                                 "anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}


def test_an_operator_url_serves_every_kind_with_the_operator_keys_only():
    policy = ProviderPolicy.only(["http://Model.Internal:8000/v1/"], ["MODEL_KEY"])
    for kind in DEFAULT_BASE_URLS:
        resolved = policy.check(spec(kind, baseUrl="http://model.internal:8000/v1", apiKeyEnv="MODEL_KEY"))
        assert resolved.base_url == "http://Model.Internal:8000/v1" and resolved.api_key_env == "MODEL_KEY"
        # an official variable goes to its own vendor's URL only, unless the operator lists it
        for name in OFFICIAL_KEY_ENVS[kind]:
            assert refused_field(policy, spec(kind, baseUrl="http://model.internal:8000/v1", apiKeyEnv=name)) == \
                "provider.apiKeyEnv"
        assert policy.check(spec(kind, apiKeyEnv="MODEL_KEY")).base_url is None  # an operator key, official URL
    assert refused_field(policy, spec(baseUrl="http://model.internal:8001/v1")) == "provider.baseUrl"
    assert refused_field(policy, spec(baseUrl="http://model.internal:8000/v2")) == "provider.baseUrl"
    listed = ProviderPolicy.only(["http://proxy:4000"], ["OPENAI_API_KEY"])
    assert listed.check(spec(baseUrl="http://proxy:4000", apiKeyEnv="OPENAI_API_KEY")).base_url == "http://proxy:4000"


def test_the_base_url_is_checked_before_the_key_and_a_refusal_names_no_allowed_value():
    policy = ProviderPolicy.only(["http://10.0.0.7:8000/v1"], ["INTERNAL_MODEL_KEY"])
    with pytest.raises(RpcError) as caught:
        policy.check(spec(baseUrl="http://attacker.example/v1", apiKeyEnv="SECRET_DB_URL"))
    assert caught.value.data["field"] == "provider.baseUrl"
    wire = str(caught.value.to_wire())
    assert "10.0.0.7" not in wire and "INTERNAL_MODEL_KEY" not in wire and "SECRET_DB_URL" not in wire
    assert "attacker" not in wire  # the client's own value is not echoed either
