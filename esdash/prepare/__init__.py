"""What is decided before anything is launched (the house plan's ``prepare`` floor).

It sits below the commands that start things (``run``, ``campaign``) and the readers
(``view``), and above the producer (``bench``), so both sides can ask it without a reader
importing the producer.  Today it holds the wall-time estimate (:mod:`.walltime`).
"""
