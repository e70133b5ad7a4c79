#!/usr/bin/python
"""Wait up to one round for a background (async) job, then report what it has done so far."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: spark_job_progress
short_description: Follow a background job one round at a time (ended or not, bytes, new log lines, build step)
description:
  - Waits up to O(wait_s) seconds for the Ansible async job whose results file is O(results_file) to end,
    returning early when it does, then measures what the job has done so far on this node.
  - Long work (a download, an image build, an archive stream, a benchmark) runs with C(async) and C(poll=0);
    the play calls this module once per round and prints one line a person can follow each round, instead of
    a silent wait or one "retrying" line per second.
  - O(bytes_under) sums the regular files under directories (a download's target, partial files included).
    O(reader_of) reads, from /proc, how far a process holding the file open has read it (the bytes an archive
    stream has sent). O(log) returns the complete lines appended to a log file since O(log_offset) and the
    build stage and step they name (C(docker build) output of the legacy builder or BuildKit's plain progress).
  - It only reads; check mode runs it the same way.
version_added: "0.1.0"
author: sparkfleet
options:
  results_file:
    description:
      - The async job's results file (C(results_file) of the registered C(poll=0) task). Omitted, nothing is
        waited for and RV(ended) is true.
    type: path
  wait_s:
    description: Longest wait for the job to end in this round, in seconds.
    type: float
    default: 30
  bytes_under:
    description: Directories (or files) whose regular files' bytes are summed into RV(bytes).
    type: list
    elements: path
    default: []
  reader_of:
    description: A file some process streams; RV(read_bytes) is how far it has read it.
    type: path
  log:
    description: A log file the job appends to.
    type: path
  log_offset:
    description: Byte offset in O(log) up to which an earlier round already read.
    type: int
    default: 0
  max_lines:
    description: Return at most this many of the new lines (the last ones).
    type: int
    default: 20
  stage:
    description: The build stage an earlier round saw (the legacy builder names it only in its FROM step).
    type: str
  step:
    description: The build step an earlier round saw, kept when this round's lines name none.
    type: str
extends_documentation_fragment: [sparkfleet.spark.spark_read_only]
"""

EXAMPLES = r"""
- name: Model | Start the download (followed below)
  ansible.builtin.command:
    argv: [/opt/sparkfleet/hf/bin/hf, download, deepseek-ai/DeepSeek-V4.1-Flash, --local-dir, /models/dsv41f]
  async: 86400
  poll: 0
  register: download_job
  changed_when: true

- name: Model | Follow the download for one round
  sparkfleet.spark.spark_job_progress:
    results_file: "{{ download_job.results_file }}"
    wait_s: 30
    bytes_under: [/models/dsv41f]
  register: download_round

- name: Model | Report the round
  ansible.builtin.debug:
    msg: "{{ 'download' | sparkfleet.spark.spark_progress_line(60, download_round.ended, download_round.bytes) }}"
"""

RETURN = r"""
ended:
  description: Whether the job ended (successfully or not; its outcome is what async_status returns).
  returned: always
  type: bool
  sample: false
waited_s:
  description: Seconds this round waited.
  returned: always
  type: float
  sample: 30.0
bytes:
  description: Bytes of the regular files under O(bytes_under).
  returned: when O(bytes_under) is given
  type: int
  sample: 13287555072
read_bytes:
  description: How far a process holding O(reader_of) open has read it; null when no process holds it.
  returned: when O(reader_of) is given
  type: int
  sample: 4294967296
read_size:
  description: Size of O(reader_of) in bytes; null when it does not exist.
  returned: when O(reader_of) is given
  type: int
  sample: 17179869184
lines:
  description: Complete lines appended to O(log) since O(log_offset) (the last O(max_lines) of them).
  returned: when O(log) is given
  type: list
  elements: str
  sample: ["Step 7/19 : RUN make -j12"]
log_offset:
  description: Offset to pass as O(log_offset) in the next round.
  returned: when O(log) is given
  type: int
  sample: 18234
stage:
  description: The build stage the lines (or O(stage)) name, null when none.
  returned: when O(log) is given
  type: str
  sample: vllm-build
step:
  description: The last build step the lines name (or O(step) when they name none), null when none.
  returned: when O(log) is given
  type: str
  sample: "step 7/19: RUN make -j12"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_progress import (
    ProgressError, measure, wait_for_job)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            results_file=dict(type="path"),
            wait_s=dict(type="float", default=30.0),
            bytes_under=dict(type="list", elements="path", default=[]),
            reader_of=dict(type="path"),
            log=dict(type="path"),
            log_offset=dict(type="int", default=0),
            max_lines=dict(type="int", default=20),
            stage=dict(type="str"),
            step=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["wait_s"] < 0:
        module.fail_json(msg=f"spark_job_progress: wait_s must be >= 0, got {params['wait_s']}")
    ended, waited = (True, 0.0) if not params["results_file"] else wait_for_job(params["results_file"],
                                                                                  params["wait_s"])
    try:
        figures = measure(params)
    except (OSError, ProgressError) as exc:
        module.fail_json(msg=f"spark_job_progress: {exc}")
    module.exit_json(changed=False, ended=ended, waited_s=round(waited, 1), **figures)


if __name__ == "__main__":
    main()
