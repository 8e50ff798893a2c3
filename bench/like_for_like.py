"""The comparison scripts' like-for-like rule (bench/README.md "Like for like").

An anchor that has only an in-place form (Gloo's allreduce; every broadcast: Gloo's and
MPI_Bcast) is compared with podnet's in-place time, every other anchor with podnet's
out-of-place time. compare_coll.sh and compare_lab.sh import it from here.
"""


def in_place_only(anchor, coll):
    return coll == "broadcast" or (coll == "allreduce" and anchor.startswith("gloo"))
