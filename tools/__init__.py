"""The tooling behind `python3 dev.py`, standard library only (it runs before any venv exists).

`dev.py`, at the root, holds the supported versions, the command table and the command line;
these modules hold what its commands do, one concern each. Besides the standard library they
import `tools.venvs` only, and it none of them, so nothing imports `dev.py` back and there is
no circle (tests/project/test_tooling.py checks it):

    venvs        virtual environments, made once and stamped, and running commands in them
    debian_root  a Python that the machine lacks, from a Debian sid root made with debootstrap
    screenshots  the built docs site served on localhost and rendered by headless Chromium
    downstream   published projects' test suites, run with 1.6.3 and with this checkout
"""
