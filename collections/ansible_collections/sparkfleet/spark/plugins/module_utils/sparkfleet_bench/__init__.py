"""sparkfleet's benchmark of an OpenAI-compatible endpoint, standard library only (plots included).

The same files import under two names: `sparkfleet_bench` where pip installed them (bench/pyproject.toml, the
sparkfleet-bench and sparkfleet-bench-scheduled commands) or the bench_schedule role copied them to a node, and
`ansible_collections.sparkfleet.spark.plugins.module_utils.sparkfleet_bench` for the spark_bench module (AnsiballZ
ships the subpackage in its payload) and the spark_bench_options filter. The modules import each other
relatively, so neither name is written in them.
"""

# sparkfleet's version, as the collection's galaxy.yml declares it. The package carries its own copy because a
# pip install, a module payload and a node have no galaxy.yml beside it; a unit test holds the two equal.
__version__ = "1.0.0"
