"""Torch's text, in one place: every name and message format of torch's that compiletrace
reads, as literals and patterns, free of torch.

Torch has two faces compiletrace depends on: its APIs (``compiletrace._core.torch_compat``)
and its text, which is here: the names of the regions torch times, the names Dynamo gives
the code after a graph break, and the wording of its recompile reasons (failed guards) and
graph-break reasons. A torch release that rewords one is a change to this module, and
``tests/capture/test_torch_text_contract.py`` (run on every torch ``.ci/run`` tests)
compiles real programs and checks that every pattern here still matches what the
installed torch writes. The record keys of torch's TORCH_TRACE logs are read in
:mod:`compiletrace._data.torch_trace`.

Patterns are searched in one line of torch's text unless they say otherwise. Alternatives
(``a|b``) are kept one wording each, so the contract can check every one.

>>> bool(SIZE_MISMATCH.search("tensor 'x' size mismatch at index 0. expected 2, actual 3"))
True
>>> RESUME_NAME.match("torch_dynamo_resume_in_forward_at_12")[1]
'forward'
"""

from __future__ import annotations

import re

__all__ = [
    "AOT_AUTOGRAD_REGIONS",
    "AOT_REGION",
    "BACKEND_REGION",
    "BACKWARD_COMPILER_REGION",
    "BACKWARD_REGION",
    "BREAK_CONTEXT_MANAGER",
    "BREAK_DATA_DEPENDENT",
    "BREAK_EXPLANATION",
    "BREAK_EXPLICIT",
    "BREAK_HINT",
    "BREAK_ITEM",
    "BREAK_LOGGING",
    "BREAK_PAGE",
    "BREAK_PRINT",
    "CACHE_BYPASS_SETTINGS",
    "CACHE_EVENT_OUTCOMES",
    "CACHE_EVENT_TIERS",
    "CACHE_KEY_DIGEST",
    "CACHE_KEY_LETTERS",
    "CACHE_REGIONS",
    "COMPILE_AUTOTUNE_REGIONS",
    "CUDAGRAPH_REGIONS",
    "DDP_BREAK",
    "DDP_CLASS",
    "FRAME_REGION",
    "FX_LOAD_REGIONS",
    "GRAPH_KEY_ATTRIBUTES",
    "GUARDED_ARGUMENT",
    "GUARDED_POSITIONAL",
    "GUARD_BACKEND",
    "GUARD_DTYPE_DEVICE",
    "GUARD_ENTRY_PREFIX",
    "GUARD_GRAD_MODE",
    "GUARD_IDENTITY",
    "GUARD_POSITIONAL_COUNT",
    "GUARD_REGIONS",
    "GUARD_SHAPE",
    "GUARD_SOURCE_COMMENT",
    "GUARD_SUBSCRIPT",
    "GUARD_SYMBOLIC",
    "GUARD_VALUE",
    "GUARD_WRAPPED_FUNCTION",
    "HEADER_REGION",
    "INDUCTOR_REGIONS",
    "KERNEL_COMPILE_REGIONS",
    "KERNEL_LOAD_REGIONS",
    "KEY_PART_LINE",
    "KWARGS_COUNT_GUARD",
    "NUMBER_CONSTANT",
    "ONE_TIME_REGIONS",
    "PROCESS_KEY_ATTRIBUTES",
    "REMOTE_CACHE_REGIONS",
    "RESUME_AT",
    "RESUME_NAME",
    "RESUME_PREFIX",
    "RUNTIME_AUTOTUNE_REGIONS",
    "SIZE_MISMATCH",
    "STACK_VALUE",
    "STANCE_REFUSED",
    "STRING_CONSTANT",
    "TENSOR_METADATA",
    "TRACING_REGIONS",
    "UNSUPPORTED",
    "VALUE_COMPARISON",
]

# -- the code Dynamo makes after a graph break ----------------------------------------------

# Dynamo compiles the rest of a frame after a break as a new function, named for the one it
# resumes and the line: "torch_dynamo_resume_in_forward_at_12" (nested for a second break).
RESUME_PREFIX = "torch_dynamo_resume_in_"
RESUME_NAME = re.compile(rf"^{RESUME_PREFIX}(\w+?)_at_\d+$")  # group 1: the function it resumes
RESUME_AT = re.compile(rf"^{RESUME_PREFIX}\w+_at_([0-9]+)$")  # group 1: the line of the break it follows

# -- the regions torch times (dynamo_timed, its chromium event logger) -----------------------

# Torch's own bounds of a whole frame compile (its metrics' entire_frame_compile_time_s:
# dynamo_timed("_compile.compile_inner", phase_name=...)), of a whole lazy backward compile
# (dynamo_timed("backward._backward_impl", ...)), and of an ahead-of-time compile
# (aot_compile_fullgraph's region).
FRAME_REGION = "entire_frame_compile"
BACKWARD_REGION = "entire_backward_compile"
AOT_REGION = "fullgraph_capture"
# The region torch times a graph's backend compile by (backend_compile_time_s): the backend
# call and torch's bookkeeping around it.
BACKEND_REGION = "backend_compile"

# The regions inside a backend call, by the phase they belong to: a region belongs to a
# phase when its name starts with one of the phase's prefixes (first phase listed wins).
KERNEL_COMPILE_REGIONS = ("compile_file", "async_compile", "CppCodeCache", "TritonCodeCache", "triton.")
CACHE_REGIONS = ("AOTAutogradCache", "FxGraphCache", "PyCodeCache", "autograd_cache", "fx_graph_cache")
INDUCTOR_REGIONS = (
    "compile_fx",
    "fx_codegen_and_compile",
    "GraphLowering",
    "Scheduler",
    "PythonWrapperCodegen",
    "_recursive_pre_grad_passes",
    "_recursive_post_grad_passes",
    "pass.pre_grad",
    "pass.post_grad",
    "additional_fake_tensor_prop",
)
AOT_AUTOGRAD_REGIONS = (
    "create_aot_dispatcher_function",
    "aot_",
    "_recursive_joint_graph_passes",
    "pass.joint_graph",
    "min_cut_rematerialization_partition",
)
# Regions that run once per process, whichever graph compiles first: the keys of torch's
# compile caches (a hash of its own sources; on CUDA builds, Triton's too).
ONE_TIME_REGIONS = ("inductor_codecache_torch_key", "CacheBase.get_system")

# The regions a warm start's ledger (compiletrace._data.ledger) splits a frame compile by,
# beyond the phases above. Dynamo tracing the frame's bytecode again, and building its
# guards (precompile's guards too), torch's whole backend call:
TRACING_REGIONS = ("bytecode_tracing", "insert_deferred_runtime_asserts")
GUARD_REGIONS = ("build_guards", "precompile_build_guards", "precompile_load_guards")
BACKEND_REGION = "backend_compile"
# Loading the compiled graph an AOTAutograd-cache hit names from the FX-graph cache, and
# loading a compiled module (its kernels: a .so or Triton's binaries) into the process.
FX_LOAD_REGIONS = ("AOTAutogradCache.inductor_load",)
KERNEL_LOAD_REGIONS = ("PyCodeCache.load_by_key_path", "TritonBundler.")
# A process's first C++ compile is its precompiled header (codecache._precompile_header),
# paid once per process whatever the cache holds: the first region of this name.
HEADER_REGION = "compile_file"
# inductor's backward compiler: inside a forward's backend call, the backward was compiled
# ahead of time with its forward (no lazy backward follows)
BACKWARD_COMPILER_REGION = "compile_fx.<locals>.bw_compiler"
# Remote caches (fbcode's FX-graph cache, profile-guided dynamic shapes' state).
REMOTE_CACHE_REGIONS = ("remote_fx_graph_cache", "pgo.")
# Autotuning while compiling (max-autotune's template choices, fused-node benchmarks): a
# region name is searched (mm_template_autotuning, flex_attention_template_precompiling).
COMPILE_AUTOTUNE_REGIONS = re.compile(r"_template_(?:autotuning|precompiling)$|^benchmark_fused_nodes$")
# Work on a compiled graph's first calls, outside any compile (torch's runtime metrics):
# Triton autotuning (runtime/triton_heuristics.py) and CUDA-graph trees' recording
# (cudagraph_trees.py). Their regions carry the graph's compile id in their arguments.
RUNTIME_AUTOTUNE_REGIONS = (
    "CachingAutotuner.benchmark_all_configs",
    "CachingAutotuner.coordinate_descent_tuning",
    "CachingAutotuner.combo_sequential_autotune",
)
CUDAGRAPH_REGIONS = ("cudagraphify.get_container", "CUDAGraphNode.record")

# Torch's instant events for a cache lookup: "<prefix><outcome>" ("fx_graph_cache_miss"),
# carrying the key. Prefix -> the cache tier, as records name it.
CACHE_EVENT_TIERS = (("fx_graph_cache_", "fx_graph"), ("autograd_cache_", "aot_autograd"))
CACHE_EVENT_OUTCOMES = frozenset({"hit", "miss", "bypass"})
# Settings of torch's that make its caches bypass a graph on every start, whatever they hold,
# by the reason torch gives (a cache lookup's detail): (the reason's pattern, what the setting
# is, the environment variable torch reads it from, the setting in code).
CACHE_BYPASS_SETTINGS = (
    (
        re.compile(r"Cannot cache a graph with freezing enabled"),  # AOTAutograd's; inductor's FX cache
        # gives another reason for a frozen graph (its constants), or none where it caches it
        "inductor's freezing (the weights become constants of the graph, which no cache keys)",
        "TORCHINDUCTOR_FREEZING",
        "torch._inductor.config.freezing",
    ),
)


def bypass_setting(reason: str) -> tuple[str, str, str] | None:
    """The setting a cache bypass's reason names (what it is, its environment variable, its
    name in code), or None for a bypass of another cause.

    >>> bypass_setting("Cannot cache a graph with freezing enabled")[1]
    'TORCHINDUCTOR_FREEZING'
    """
    for pattern, what, variable, in_code in CACHE_BYPASS_SETTINGS:
        if pattern.search(reason):
            return what, variable, in_code
    return None


# A compile cache's key as torch makes it (inductor's FX_GRAPH_CACHE_KEY_STRATEGY, the
# AOTAutograd cache's AOTAUTOGRAD_CACHE_PREFIX): the tier's letter, then a SHA-256 in
# lowercase base32, cut to 51 characters. Matched whole; the length is left open so that a
# torch that cuts elsewhere still reads, since the alphabet alone keeps a key from naming a
# path (no separator, no dot).
CACHE_KEY_LETTERS = {"fx_graph": "f", "aot_autograd": "a"}
CACHE_KEY_DIGEST = re.compile(r"[a-z2-7]{16,64}")

# -- the parts of a compile cache's key --------------------------------------------------------

# Torch describes the key of its FX-graph and AOTAutograd caches one part a line
# (FxGraphCachePickler.debug_lines): "[<hash>] <attribute>: <value>", or
# "[<hash>] <attribute>[<index or key>]: <value>" for an item of a list or a dict. The hash
# is torch's own of that part (base32, 51 characters); a value may run over several lines
# (the graph's code). Groups: the hash, the attribute, the index or key (None), the value.
KEY_PART_LINE = re.compile(r"^\[([a-z0-9]+)\] ([A-Za-z_]\w*)(?:\[(.*?)\])?: (.*)$", re.DOTALL)
# A tensor's part: its metadata (extract_tensor_metadata_for_cache_key), e.g.
# "TensorMetadata(dtype=torch.float32, shape=torch.Size([4, 16]), stride=(16, 1),
# device=device(type='cpu'), layout=torch.strided, ..., requires_grad=False, ...)". Groups:
# dtype, sizes, strides, device type, device index (None), then the other fields.
TENSOR_METADATA = re.compile(
    r"^TensorMetadata\(dtype=torch\.(\w+), shape=torch\.Size\(\[(.*?)\]\), stride=\((.*?)\), "
    r"device=device\(type='(\w+)'(?:, index=(\d+))?\)(.*)\)$",
    re.DOTALL,
)
# The key's attributes that describe the whole process: the same for every graph it
# compiles (torch's version, inductor's config, the thread count, ...). A run keeps them
# once. Every other attribute (the graph's code, its inputs, the compile's own options, and
# any attribute a new release adds) is kept with each graph.
PROCESS_KEY_ATTRIBUTES = frozenset(
    {
        # FxGraphHashDetails, in the order torch lists them (2.13-2.15)
        "cache_key_tag",
        "deterministic_algorithms_settings",
        "cpp_runtime_thread_count",
        "provenance_tracking_level",
        "provenance_tracking_to_timeline",
        "compile_on_one_rank",
        "default_dtype",
        "cuda_matmul_settings",
        "torch_version",
        "system_info",
        "inductor_config",
        "inductor_config_comms",
        "pre_grad_custom_pass",
        "post_grad_custom_pre_pass",
        "precompile_enabled",
        "post_grad_custom_post_pass",
        "joint_custom_pre_pass",
        "joint_custom_post_pass",
        "_pre_fusion_custom_pass",
        "_post_fusion_custom_pass",
        "_fuse_ddp_communication_passes",
        "custom_backend_passes",
        "custom_backend_codegen_configs",
        "custom_backend_codegen_implications",
        "_custom_partitioner_fn",
        # AOTAutogradCacheDetails' own
        "autograd_config",
        "deterministic_algorithms",
    }
)
# ... and those that describe one graph (known in 2.13-2.15: the contract test checks every
# attribute a real key has is in one of the two lists).
GRAPH_KEY_ATTRIBUTES = frozenset(
    {
        "gm",
        "example_inputs",
        "fx_kwargs",
        "user_defined_triton_source",
        "default_cuda_device_index",
        "nested_inductor_config_patches",
        "cudagraph_override",
        "cudagraph_annotation",
        "var_to_hint_override",
        "aot_config",
        "grad_enabled",
        "autocast_state",
        "triton_kernel_source_codes",
        "saved_tensors_hooks_fx_wrap_cache_hashes",
        "sac_context_fn_hashes",
        "region_activation_memory_budget",
        "region_activation_memory_budget_annotations",
        "custom_estimator_solver_uuids",
        "act_input_paths",
    }
)
# What torch.compiler.set_stance("fail_on_recompile") raises at a compile it refuses.
STANCE_REFUSED = "Detected recompile when torch.compile stance is"

# -- recompile reasons: the guard that failed -------------------------------------------------

# Torch prefixes a reason with the cache entry whose guard failed ("0/1: "), and pads a
# guard with the source line that made it ("self.step == 2    # self.step += 1  # m.py:3").
GUARD_ENTRY_PREFIX = re.compile(r"^\d+/\d+:\s*")
GUARD_SOURCE_COMMENT = re.compile(r"\s+#.*$")

# What each kind of failed guard says. A guard's first line is searched, kinds in this
# order: a backend swapped, the grad mode, a shape, a dtype or device, an object's identity,
# then a Python value.
GUARD_BACKEND = re.compile(r"BACKEND_MATCH|different backend")
GUARD_GRAD_MODE = re.compile(r"grad_mode|requires_grad mismatch")
GUARD_SHAPE = re.compile(
    r"size mismatch|stride mismatch|rank mismatch|\.size\(\)|\.stride\(\)|storage_offset"
)
GUARD_DTYPE_DEVICE = re.compile(r"dtype mismatch|device mismatch|device index mismatch|dispatch key set")
GUARD_IDENTITY = re.compile(r"___check_obj_id|___check_type_id|ID_MATCH|TYPE_MATCH")
# A guard on a size that is already dynamic: a relation between symbolic sizes the code
# branched on ("(x.size()[2] // 4) == (2*((7 + x.size()[2]) // 8))", "2 <= x.size()[0]").
GUARD_SYMBOLIC = re.compile(r"\.size\(\)\[\d+\]|\.stride\(\)\[\d+\]")
# Guards on a decorator's own locals, not on what its caller passed: the function it wraps
# ("___check_obj_id(func.__code__, ...)": one wrapper code shared by every function it wraps)
# and how many arguments came positionally ("len(args) == 1", "not args").
GUARD_WRAPPED_FUNCTION = re.compile(r"___check_obj_id\((?:L\[['\"])?func(?:['\"]\])?\.__code__")
GUARD_POSITIONAL_COUNT = re.compile(r"^(?:not\s+|len\()(?:L\[['\"])?args\b")
GUARD_VALUE = re.compile(r"==|!=|\blen\(| is None| is not None|___dict_contains")

# A static size guard: the tensor, the dimension, and (where torch gives them) the size the
# entry was compiled for and the size seen: "tensor 'x' size mismatch at index 0. expected
# 2, actual 3".
# A subscript in a guard's source ("args[1].layers[7].is_initialized"): group 1 the attribute
# indexed, group 2 the index. Blocks compiled one by one that each fail on another index of
# one attribute specialise on their own (their cache layer, their position).
GUARD_SUBSCRIPT = re.compile(r"\.(\w+)\[([0-9]+)\]")
SIZE_MISMATCH = re.compile(
    r"tensor '(.+?)' size mismatch at index ([0-9]+)(?:\. expected ([0-9]+), actual ([0-9]+))?"
)
# A value guard: what was guarded, and the constant it had to equal ("self.step == 2").
VALUE_COMPARISON = re.compile(r"^\s*([\w.\[\]'\"]+)\s*==\s*(.*)$")
STRING_CONSTANT = re.compile(r"^(['\"]).*\1$")  # a constant that is a string ('default')
NUMBER_CONSTANT = re.compile(r"^-?(?:[\d.]+(?:e[-+]?\d+)?|inf|nan)$")  # one that is a number (2.0)
# A value on the stack of a resume function: what the code before a graph break computed in
# Python (a .item(), a .tolist()) and handed to the graph after it ("___stack0 == 2.0").
STACK_VALUE = re.compile(r"^(?:L\[['\"])?___stack\d+")
# The number of keyword arguments of a function taking **kwargs ("len(kwargs) == 6").
KWARGS_COUNT_GUARD = re.compile(r"^len\((?:L\[['\"])?kwargs")
# How a guard names an argument: x, kwargs['input_ids'], and in older releases L['x'] and
# L['kwargs']['mask']. Group 1: the argument's own name.
GUARDED_ARGUMENT = re.compile(r"^(?:L\[['\"]kwargs['\"]\]|L|kwargs)\[['\"](\w+)['\"]\]")
# A positional argument a wrapper took as ``*args``: args[0], L['args'][0]. Group 1: its index.
GUARDED_POSITIONAL = re.compile(r"^(?:L\[['\"]args['\"]\]|args)\[([0-9]{1,4})\]")

# -- graph-break reasons ----------------------------------------------------------------------

# DistributedDataParallel's forward, which Dynamo does not trace by design (its
# _inside_ddp_forward is marked skipped; its logger's method breaks): the module's class, and
# what its frames' break reasons name.
DDP_CLASS = "DistributedDataParallel"
DDP_BREAK = re.compile(r"_inside_ddp_forward|set_runtime_stats_and_log")

# Torch's reason for a break: a first line, then indented "Explanation:" and "Hint:" lines
# (searched with re.MULTILINE: each hint is a line of its own).
BREAK_EXPLANATION = "Explanation:"
BREAK_HINT = re.compile(r"^\s*Hint:\s*(.+)$", re.MULTILINE)
# The framing sentence torch's log puts before the reason of a break met while tracing a call.
_BREAK_FRAMING = "Encountered graph break when attempting to trace"
# The page torch's message names for a documented break type (its graph-break code, "gb0170").
BREAK_PAGE = re.compile(r"https?://\S+/gb/(gb\d{1,6})\.html")


def break_reason(text: str) -> str:
    """Torch's user-facing reason for a break, as its message gives it (the text a
    ``TORCH_TRACE`` log and the live ``log_graph_break`` hold alike): the framing sentence
    some carry first is left out.

    >>> break_reason("Encountered graph break when attempting to trace CALL: x\\n\\nData-dependent branching")
    'Data-dependent branching'
    """
    reason = text.strip()
    head, sep, rest = reason.partition("\n\n")
    if sep and head.startswith(_BREAK_FRAMING):
        reason = rest.strip()
    return reason


def is_user_facing_break(text: str) -> bool:
    """Whether a break's reason is torch's message for users (a title, then its explanation)
    rather than Dynamo's internal name for it (``generic_jump TensorVariable()``).

    >>> is_user_facing_break("generic_jump TensorVariable()")
    False
    """
    return BREAK_EXPLANATION in text


# The causes of a break the doctor knows a fix for.
BREAK_PRINT = re.compile(r"`print`")  # a print() in the compiled code
BREAK_LOGGING = re.compile(r"logging|logger")  # a logging call
BREAK_ITEM = re.compile(r"Tensor\.item\(\)|capture_scalar_outputs")  # a .item()
BREAK_EXPLICIT = re.compile(r"graph_break\(\)|Call to `torch._dynamo.graph_break")  # graph_break()
BREAK_DATA_DEPENDENT = re.compile(r"Data.dependent|data.dependent|generic_jump|jump")  # if on a tensor
BREAK_CONTEXT_MANAGER = re.compile(r"context manager")  # a with-block Dynamo cannot enter (a lock)
# The name of the exception Dynamo raises at a break it cannot split on (fullgraph=True):
# torch._dynamo.exc.Unsupported, as a record's error_type ends.
UNSUPPORTED = "Unsupported"
