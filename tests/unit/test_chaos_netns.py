"""The partition harness's plan of names and addresses, without making any of it.

Cleanup removes by name prefix and the subnet must not collide with the machine's,
so the names and addresses a ``Network`` will make are fixed before it makes them.
"""

from __future__ import annotations

from chaos.netns import FIRST_HOST, Network


def test_hosts_get_the_subnet_from_dot_11_in_order_and_names_under_the_prefix() -> None:
    net = Network(["kafka-1", "kafka-2", "kafka-3"], prefix="sgx", subnet="10.231.99.0/24")
    assert FIRST_HOST == 11
    assert [h.address for h in net.hosts.values()] == [
        "10.231.99.11",
        "10.231.99.12",
        "10.231.99.13",
    ]
    assert net.gateway == "10.231.99.1"
    assert [h.namespace for h in net.hosts.values()] == [
        "sgx-kafka-1",
        "sgx-kafka-2",
        "sgx-kafka-3",
    ]
    assert (net.switch, net.host_link) == ("sgx-sw", "sgx-host")
    assert net["kafka-2"].prefix == ("ip", "netns", "exec", "sgx-kafka-2")


def test_every_link_name_fits_the_kernel_limit_of_15_characters() -> None:
    net = Network(["kafka-1"])
    assert all(len(name) <= 15 for name in (net.host_link, net.switch))
