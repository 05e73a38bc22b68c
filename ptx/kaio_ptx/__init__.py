"""kaio_ptx: the library every PTX generator (ptx/gen_*.py) builds on.

Standard library only.  A generator imports kaio_ptx modules (and, if it is
split over several files, its own private modules), never another
generator.  See README.md here for what lives where."""
