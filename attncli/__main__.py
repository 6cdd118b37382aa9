"""python -m attncli"""

from attncli.cli import main

main(prog_name="attncli")
