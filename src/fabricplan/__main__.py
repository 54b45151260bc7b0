from fabricplan.cli import main

# guarded: worker processes of a sweep (multiprocessing's fork server) import the parent's
# main module, and must not run the command again
if __name__ == "__main__":
    main()
