"""What this installation is and what in it needs a fix (``abhed doctor``, the TUI's ``/doctor``).

Public surface: :func:`examine` → :class:`Report` (its :class:`Finding` list,
``exit_code`` 0/1/2, ``lines()`` for people, ``as_json()`` for programs).  It
calls the checks that own each answer (settings and site layer, provider and
its on-demand service, catalog, sandbox and KVM, event log); it raises nothing
for what it finds.
"""

from appliance.doctor._examine import Finding, Report, examine

__all__ = ["Finding", "Report", "examine"]
