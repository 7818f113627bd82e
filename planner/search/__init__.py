"""The search: candidate layouts per (task, group size), a CP-SAT model choosing groups,
placement and layouts, a brute-force enumerator over the same space, and the plan it yields."""
