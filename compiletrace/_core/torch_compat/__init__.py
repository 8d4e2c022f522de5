"""Every private torch API that compiletrace touches, in one package.

The next torch release may move any of these. The measuring accessors are guarded: when
the internal they need is missing or has changed shape, they return a neutral value and the
caller degrades (with one warning, issued by :func:`warn_once`), never crashing the user's
model. The few that compiling itself needs (the backend lookup, inductor's modes and
options) raise torch's own error instead, as ``torch.compile`` would.

One module per concept, each saying which internals it uses, and why:

==================  =========================================================================
``callbacks``       Dynamo's start/end callbacks, kept registered across ``torch._dynamo.reset()``
``frames``          the frame being compiled: code, backend, compile id, graph breaks, the
                    recompile limit
``metrics``         torch's metrics context (recompile and restart reasons, a frame given up
                    on) and its per-compile rows
``event_logger``    torch's chromium event logger, teed: timed regions, cache-lookup events
``caches``          cache hit/miss counters, the inductor cache directory
``cache_keys``      each cache lookup's key and the parts it is made of, and the process's
                    facts that decide whether a cache applies
``artifacts``       what a cache-artifact file may hold, and where torch writes its entries
``structure``       an FX graph's structural hash, and a block repeated inside it
``dynamic_sources`` what torch's automatic dynamic made dynamic in a compiled code
``tracing``         Dynamo's tracing time per user function (``trace_cost``), and which files
                    are the user's
``backend_calls``   every Dynamo backend call, whatever the backend (passive recording), and
                    torch's ahead-of-time path, which calls its backend directly
``backends``        backend lookup, inductor modes, options and config, backend failures
``distributed``     a process group's timeout
``fixes``           the Dynamo settings a fix applied from outside a program makes
                    (``compiletrace run --apply``, ``doctor --verify``)
``compile_workers`` inductor's compile-worker pools, whose processes' CPU is the compile's
``one_time``        torch's once-per-process set-up no timed region covers (the CPU's vector
                    instruction probe), timed at its first call
``stance``          torch.compile's stance toward new compiles, set at the ready mark by the
                    fixes that take effect there
``trace_log``       compiletrace's own entries in torch's structured trace (the ready mark)
``capabilities``    the one table of what this torch gives, with a probe for each
==================  =========================================================================

Code outside this package imports names from it, never from its modules
(``tests/test_layout.py`` checks it), and its modules never import it. The modules call
each other directly, so a test that stands in for a function the package's own modules call
patches it in the module that holds it.
"""

from __future__ import annotations

from compiletrace._core.torch_compat.artifacts import (
    CACHE_ARTIFACT_FIELD_USES,
    CACHE_ARTIFACT_GLOBALS,
    CACHE_ARTIFACT_JSON_KINDS,
    GUARD_ARGUMENT,
    GUARD_CALLS,
    GUARD_CONSTANTS,
    REFUSED_ARTIFACT_GLOBALS,
    ArtifactClassShape,
    FieldUse,
    cache_artifact_class_shape,
    cache_artifact_location,
    cache_artifact_object_paths,
    quiet_cache_artifact_logs,
)
from compiletrace._core.torch_compat.backend_calls import (
    AotCompileListener,
    BackendCallHandler,
    install_aot_compile_hook,
    install_backend_call_hook,
    remove_backend_call_handler,
)
from compiletrace._core.torch_compat.backends import (
    backend_error,
    backend_failure_type,
    inductor_config_keys,
    inductor_mode_options,
    list_backends,
    lookup_backend,
)
from compiletrace._core.torch_compat.backends import inductor_modes as inductor_modes
from compiletrace._core.torch_compat.backends import patched_suppress_errors as patched_suppress_errors
from compiletrace._core.torch_compat.backends import suppress_errors as suppress_errors
from compiletrace._core.torch_compat.cache_keys import (
    CONFIG_SETS,
    CacheLookups,
    cache_facts,
    cache_key_hooks_available,
    collect_cache_lookups,
    install_cache_key_hooks,
    run_cache_keys,
    torch_importing,
)
from compiletrace._core.torch_compat.caches import CacheCounts, cache_counts, inductor_cache_dir
from compiletrace._core.torch_compat.callbacks import (
    TRIGGER_DYNAMO,
    TRIGGER_LAZY_BACKWARD,
    CompileEventCallback,
    callbacks_available,
    install_callbacks,
    load_dynamo,
    on_dynamo_reset,
)
from compiletrace._core.torch_compat.callbacks import (
    ensure_callbacks_registered as ensure_callbacks_registered,
)
from compiletrace._core.torch_compat.callbacks import (
    uninstall_callbacks_for_tests as uninstall_callbacks_for_tests,
)
from compiletrace._core.torch_compat.capabilities import Capability, capabilities, warn_missing_capabilities
from compiletrace._core.torch_compat.compile_workers import compile_pool_pids, compile_workers_available
from compiletrace._core.torch_compat.distributed import (
    DEFAULT_PROCESS_GROUP_TIMEOUT_S as DEFAULT_PROCESS_GROUP_TIMEOUT_S,
)
from compiletrace._core.torch_compat.distributed import process_group_timeout
from compiletrace._core.torch_compat.dynamic_sources import (
    automatic_dynamic_sources,
    automatic_dynamic_state_available,
)
from compiletrace._core.torch_compat.event_logger import (
    RUNTIME_REGIONS,
    RuntimeListener,
    collect_timed_regions,
    current_frame_region_sink,
    frame_region_sink,
    install_cache_lookup_hook,
    install_region_hook,
    install_runtime_hook,
)
from compiletrace._core.torch_compat.event_logger import RegionListener as RegionListener
from compiletrace._core.torch_compat.fixes import (
    CONFIG_FIXES,
    ConfigFix,
    apply_config_fix,
    check_config_fix_names,
    config_fixes_available,
    raise_recompile_limit,
    set_recompile_limit,
)
from compiletrace._core.torch_compat.frames import MAX_REASON_CHARS as MAX_REASON_CHARS
from compiletrace._core.torch_compat.frames import (
    CompilingFrame,
    RecompileLimitListener,
    compile_name,
    compile_settings,
    compiling_frame,
    current_compile_context,
    current_compile_id,
    graph_break_mark,
    graph_breaks_since,
    innermost_backend,
    install_recompile_limit_hook,
    is_restart,
    recompile_limit,
)
from compiletrace._core.torch_compat.metrics import (
    compilation_metrics,
    frame_failure,
    frame_failure_type,
    recompile_reason,
    restart_reasons,
)
from compiletrace._core.torch_compat.one_time import (
    ONE_TIME_FUNCTIONS,
    one_time_functions_available,
    time_one_time_functions,
)
from compiletrace._core.torch_compat.stance import (
    STANCE_FIXES,
    apply_stance_fix,
    is_stance_fix,
    stance_fixes_available,
)
from compiletrace._core.torch_compat.structure import graph_block, graph_structure_hash, repeated_block
from compiletrace._core.torch_compat.trace_log import trace_artifacts_available, write_trace_artifact
from compiletrace._core.torch_compat.tracing import (
    install_trace_cost_hook,
    set_trace_collector,
    trace_collector,
)
from compiletrace._data.torch_text import (  # torch's names
    AOT_REGION,
    BACKEND_REGION,
    BACKWARD_REGION,
    FRAME_REGION,
)
from compiletrace._io.state import warn_once as warn_once

__all__ = [
    "AOT_REGION",
    "BACKEND_REGION",
    "BACKWARD_REGION",
    "CACHE_ARTIFACT_FIELD_USES",
    "CACHE_ARTIFACT_GLOBALS",
    "CACHE_ARTIFACT_JSON_KINDS",
    "CONFIG_FIXES",
    "CONFIG_SETS",
    "FRAME_REGION",
    "GUARD_ARGUMENT",
    "GUARD_CALLS",
    "GUARD_CONSTANTS",
    "ONE_TIME_FUNCTIONS",
    "REFUSED_ARTIFACT_GLOBALS",
    "RUNTIME_REGIONS",
    "STANCE_FIXES",
    "TRIGGER_DYNAMO",
    "TRIGGER_LAZY_BACKWARD",
    "AotCompileListener",
    "ArtifactClassShape",
    "BackendCallHandler",
    "CacheCounts",
    "CacheLookups",
    "Capability",
    "CompileEventCallback",
    "CompilingFrame",
    "ConfigFix",
    "FieldUse",
    "RecompileLimitListener",
    "RuntimeListener",
    "apply_config_fix",
    "apply_stance_fix",
    "automatic_dynamic_sources",
    "automatic_dynamic_state_available",
    "backend_error",
    "backend_failure_type",
    "cache_artifact_class_shape",
    "cache_artifact_location",
    "cache_artifact_object_paths",
    "cache_counts",
    "cache_facts",
    "cache_key_hooks_available",
    "callbacks_available",
    "capabilities",
    "check_config_fix_names",
    "collect_cache_lookups",
    "collect_timed_regions",
    "compilation_metrics",
    "compile_name",
    "compile_pool_pids",
    "compile_settings",
    "compile_workers_available",
    "compiling_frame",
    "config_fixes_available",
    "current_compile_context",
    "current_compile_id",
    "current_frame_region_sink",
    "frame_failure",
    "frame_failure_type",
    "frame_region_sink",
    "graph_block",
    "graph_break_mark",
    "graph_breaks_since",
    "graph_structure_hash",
    "inductor_cache_dir",
    "inductor_config_keys",
    "inductor_mode_options",
    "innermost_backend",
    "install_aot_compile_hook",
    "install_backend_call_hook",
    "install_cache_key_hooks",
    "install_cache_lookup_hook",
    "install_callbacks",
    "install_recompile_limit_hook",
    "install_region_hook",
    "install_runtime_hook",
    "install_trace_cost_hook",
    "is_restart",
    "is_stance_fix",
    "list_backends",
    "load_dynamo",
    "lookup_backend",
    "on_dynamo_reset",
    "one_time_functions_available",
    "process_group_timeout",
    "quiet_cache_artifact_logs",
    "raise_recompile_limit",
    "recompile_limit",
    "recompile_reason",
    "remove_backend_call_handler",
    "repeated_block",
    "restart_reasons",
    "run_cache_keys",
    "set_recompile_limit",
    "set_trace_collector",
    "stance_fixes_available",
    "time_one_time_functions",
    "torch_importing",
    "trace_artifacts_available",
    "trace_collector",
    "warn_missing_capabilities",
    "write_trace_artifact",
]
