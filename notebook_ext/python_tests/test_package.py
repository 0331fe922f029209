"""The package finds its plugin and works from any directory; small API pieces."""

import os
import subprocess
import sys

import xlaprof as xp
from xlaprof import _plugin


def test_the_plugin_of_the_dependency_is_found():
    found = _plugin.find_plugin()
    assert found is not None and os.path.isfile(found)
    assert found.endswith("xla_cpu_pjrt.so")


def test_works_from_an_unrelated_directory_without_an_active_venv(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "XLAPROF_PJRT_PLUGIN")}
    code = "import xlaprof as xp; print((xp.ones(3) * 2).sum().item())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "6.0"


def test_no_grad_as_a_decorator():
    @xp.no_grad()
    def f(x):
        return x * 2

    x = xp.tensor([1.0], requires_grad=True)
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_modules_collect_nested_parameters():
    class Net(xp.nn.Module):
        def __init__(self):
            self.blocks = [xp.nn.Linear(2, 2, seed=1), {"norm": xp.nn.LayerNorm(2)}]
            self.scale = xp.tensor([1.0], requires_grad=True)
            self.frozen = xp.tensor([1.0])

    assert len(Net().parameters()) == 5


def _fake_site(tmp_path, relative):
    site = tmp_path / "site-packages"
    library = site / relative
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")  # only the lookup is tested: nothing loads this file
    return str(site), str(library)


def test_cuda_plugins_are_found_where_their_packages_install_them(tmp_path):
    for relative in ("xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so",
                     "xla_plugins/xla_cuda13_pjrt/xla_gpu_pjrt.so",
                     "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
                     "jax_plugins/xla_cuda13/xla_cuda_plugin.so"):
        site, library = _fake_site(tmp_path / relative.replace("/", "_"), relative)
        assert _plugin.find_plugin("cuda", [site]) == library
        assert _plugin.find_plugin("cpu", [site]) is None


def test_the_official_cuda_plugin_comes_before_jax_s(tmp_path):
    site, official = _fake_site(tmp_path, "xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so")
    jax = tmp_path / "site-packages" / "jax_plugins" / "xla_cuda13" / "xla_cuda_plugin.so"
    jax.parent.mkdir(parents=True)
    jax.write_bytes(b"")
    assert _plugin.find_plugin("cuda", [site]) == official


def test_an_unknown_device_finds_nothing_and_leaves_the_error_to_the_engine(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "XLAPROF_PJRT_PLUGIN")}
    env["XLAPROF_DEVICE"] = "tpu9"
    code = ("import xlaprof as xp\ntry:\n    xp.ones(3).sum().item()\n"
            "except xp.PluginError as e:\n    print('PluginError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PluginError XLAPROF_DEVICE=\"tpu9\" is not a device"), out.stdout


def test_the_xlaprof_command_is_a_console_entry_point_that_says_when_the_build_lacks_it():
    from importlib.metadata import entry_points

    from xlaprof import _command

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "xlaprof"]
    assert script.value == "xlaprof._command:main"
    # The development build that the tests install carries no binary (release wheels do:
    # scripts/build_wheels.sh); the script then says what to do instead of failing obscurely.
    assert _command.binary() is None
    run = subprocess.run([sys.executable, "-c", "from xlaprof._command import main; main()"],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "has no `xlaprof` command" in run.stderr and "scripts/build_wheels.sh" in run.stderr
