"""Run under mpiexec or srun: allgather each rank's identity; rank 0 prints one JSON line.

(Only rank 0 prints: the launchers interleave concurrent output of several ranks.)
"""

import json
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
me = {"rank": comm.Get_rank(), "node": os.environ.get("SLURMD_NODENAME")}
gathered = comm.allgather(me)
views = comm.gather(gathered, root=0)
if comm.Get_rank() == 0:
    summary = {
        "size": comm.Get_size(),
        "gathered": gathered,
        "all_agree": all(view == gathered for view in views),
        "library": MPI.Get_library_version().splitlines()[0],
    }
    print(json.dumps(summary), flush=True)
