#!/usr/bin/python
"""Probe every fabric path of this node with don't-fragment pings at the jumbo size (read-only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_fabric_paths
short_description: Jumbo don't-fragment ping to the peer address of every fabric path, with RTT
description:
  - For every path, pings the peer address through the path's own netdev with the don't-fragment bit and
    O(size) bytes of payload (8972 = MTU 9000 less 28 bytes of IP and ICMP headers); every probe must be answered.
  - With O(oversize_probe), also sends O(size)+1 bytes, which must not be answered, proving the MTU is exactly
    O(size)+28 and not larger somewhere on the path.
  - Never changes anything; C(changed) is always false.
version_added: "0.1.0"
author: sparkfleet
options:
  paths:
    description:
      - The node's planned paths; each needs C(netdev) and C(peer_address); C(peer_host) and C(peer_netdev)
        are carried into the result.
    type: list
    elements: dict
    required: true
  size:
    description: ICMP payload bytes of the jumbo probe.
    type: int
    default: 8972
  count:
    description: Probes per path.
    type: int
    default: 2
  timeout:
    description: Seconds to wait for each reply (C(ping -W)).
    type: int
    default: 1
  oversize_probe:
    description: Also send O(size)+1 bytes, which must fail.
    type: bool
    default: true
  fail_on_error:
    description: Fail when any path is broken; when false the result still carries C(ok=false).
    type: bool
    default: true
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
requirements:
  - iputils ping
"""

EXAMPLES = r"""
- name: fabric | Probe every path at 8972 bytes, don't fragment
  sparkfleet.spark.spark_fabric_paths:
    paths:
      - {netdev: enp1s0f0np0, peer_host: dgx2, peer_netdev: enp1s0f1np1, peer_address: 10.12.1.2}
    fail_on_error: false
  register: spark_fabric_paths
"""

RETURN = r"""
ok:
  description: True when every path passed.
  returned: always
  type: bool
msg:
  description: Summary; on failure one line per broken path naming interface and peer.
  returned: always
  type: str
paths:
  description: One entry per path.
  returned: always
  type: list
  elements: dict
  sample:
    - netdev: enp1s0f0np0
      peer_host: dgx2
      peer_netdev: enp1s0f1np1
      peer_address: 10.12.1.2
      size: 8972
      ok: true
      rtt_ms: 0.166
      rtt_max_ms: 0.229
      received: 2
      transmitted: 2
      oversize_refused: true
      problems: []
"""

from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_fabric_probe import (
    PingResult, parse_ping, path_verdict, ping_command)


def _probe(module: AnsibleModule, ping: str, path: Dict[str, Any], size: int) -> PingResult:
    p = module.params
    _, out, err = module.run_command(ping_command(ping, path["netdev"], path["peer_address"], size,
                                                  p["count"], p["timeout"]))
    try:
        return parse_ping(out + "\n" + err)
    except ValueError as exc:
        module.fail_json(msg=f"ping via {path['netdev']} to {path['peer_address']}: {exc}")
        raise


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="dict", required=True),
            size=dict(type="int", default=8972),
            count=dict(type="int", default=2),
            timeout=dict(type="int", default=1),
            oversize_probe=dict(type="bool", default=True),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for i, path in enumerate(p["paths"]):
        missing = [k for k in ("netdev", "peer_address") if not path.get(k)]
        if missing:
            module.fail_json(msg=f"paths[{i}] is missing {', '.join(missing)}")
    if p["size"] < 1 or p["count"] < 1 or p["timeout"] < 1:
        module.fail_json(msg="size, count and timeout must be positive")
    ping = module.get_bin_path("ping", required=True)
    results: List[Dict[str, Any]] = []
    for path in p["paths"]:
        jumbo = _probe(module, ping, path, p["size"])
        oversize: Optional[PingResult] = _probe(module, ping, path, p["size"] + 1) if p["oversize_probe"] else None
        results.append(path_verdict(path, jumbo, oversize, p["size"]))
    broken = [r for r in results if not r["ok"]]
    msg = (f"{len(results)} paths pass at {p['size']} bytes" if not broken else
           "; ".join(f"{r['netdev']} -> {r['peer_host']}:{r['peer_netdev']} ({r['peer_address']}): "
                     + ", ".join(r["problems"]) for r in broken))
    result = dict(changed=False, ok=not broken, msg=msg, paths=results)
    if broken and p["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
