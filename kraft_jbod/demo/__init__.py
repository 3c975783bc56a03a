"""``kraft-jbod demo``: the scenario (:mod:`kraft_jbod.demo.scenario`) and its command
(:mod:`kraft_jbod.demo.commands`). Importing this package loads neither."""
