from ambereval.cli.main import run

run()
