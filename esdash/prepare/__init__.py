"""What is decided before anything is launched (the house plan's ``prepare`` floor).

It sits below the commands that start things (``run``, ``campaign``) and the readers
(``view``), and above the producer (``bench``), so both sides can ask it without a reader
importing the producer:

* :mod:`.checks`: the pre-flight checks every way into a run passes, one module per theme;
* :mod:`.plan`: the benchmark plan ``esdash run`` writes for the ranks (``bench.json``);
* :mod:`.preview`: what a session will run, task by task (``esdash plan``, the plan screen);
* :mod:`.sessions`: the session files a user can start, validated (the home screen);
* :mod:`.walltime` and :mod:`.timelimit`: how long a run takes, and the Slurm time it asks;
* :mod:`.slurm_job`: what a session's batch job asks Slurm for (``esdash submit``).
"""
