from fabricplan.cli import main

main()
