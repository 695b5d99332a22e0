"""linux/cgroup.py: /proc/PID/cgroup as container runtimes write it, a table of real lines.

Where the lines come from: the v1 tables and the BottleRocket, OpenShift (CRI-O 1.17 and
1.19) and containerd 1.4.4 lines are copied from neuvector/neuvector's
share/system/cgroup_test.go (each captured on the host it names); the cgroup v2 lines are the
same runtimes' paths as a unified hierarchy shows them (systemd driver: "0::" and the path
above; the layouts falcosecurity/libs's container engines match: cri.cpp, podman.cpp);
Podman's are its systemd scopes (machine.slice rootful, user@UID.service rootless) and its
cgroupfs "libpod_parent" directory.
"""
from __future__ import annotations

import pytest

from tracer.linux.cgroup import (Container, cgroup_arg, container_of_path, container_prefix,
                                 in_cgroup, parse_proc_cgroup)

C1 = "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830"
C2 = "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607"
C3 = "7a1fd6fe8cdfbd44dc78c4cc85dad7031eaab4365801684cad0aabdeaf863f9e"
C4 = "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e"
C5 = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"
C6 = "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"
C7 = "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"
C8 = "cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c"
C9 = "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903"
P1 = "3e4f1c2b8a9d4e6f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"
UID1 = "dd1bf9d1-241d-47f5-8e25-12de83135812"

CASES = [
    # --- cgroup v2 (systemd driver)
    ("containerd, besteffort pod (v2)",
     f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"dd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-{C1}.scope\n",
     2, Container("containerd", C1, UID1, "besteffort")),
    ("containerd, guaranteed pod (no QoS slice)",
     f"0::/kubepods.slice/kubepods-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/"
     f"cri-containerd-{C1}.scope\n",
     2, Container("containerd", C1, UID1, "guaranteed")),
    ("CRI-O, burstable static pod (32-hex uid)",
     f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
     f"487a0dc6dccaeefbcfedba7a7ce1ca18.slice/crio-{C3}.scope\n",
     2, Container("cri-o", C3, "487a0dc6dccaeefbcfedba7a7ce1ca18", "burstable")),
    ("CRI-O's conmon is no container",
     f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
     f"487a0dc6dccaeefbcfedba7a7ce1ca18.slice/crio-conmon-{C3}.scope\n", 2, None),
    ("Docker, systemd driver", f"0::/system.slice/docker-{C5}.scope\n", 2,
     Container("docker", C5)),
    ("Docker, cgroupfs driver", f"0::/docker/{C6}\n", 2, Container("docker", C6)),
    ("Podman rootful", f"0::/machine.slice/libpod-{P1}.scope\n", 2, Container("podman", P1)),
    ("Podman, a process in the scope's container child",
     f"0::/machine.slice/libpod-{P1}.scope/container\n", 2, Container("podman", P1)),
    ("Podman rootless",
     f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{P1}.scope\n", 2,
     Container("podman", P1)),
    ("Podman's conmon", f"0::/machine.slice/libpod-conmon-{P1}.scope\n", 2, None),
    ("Podman cgroupfs", f"0::/libpod_parent/libpod-{P1}\n", 2, Container("podman", P1)),
    ("KinD node: kubelet's own cgroup root",
     f"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
     f"kubelet-kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/"
     f"cri-containerd-{C1}.scope\n",
     2, Container("containerd", C1, UID1, "besteffort")),
    ("another cgroup namespace: the pod is above the reader's root",
     f"0::/../cri-containerd-{C1}.scope\n", 2, Container("containerd", C1)),
    ("a host process", "0::/user.slice/user-0.slice/session-3.scope\n", 2, None),
    ("a docker-like name that is not a container id",
     "0::/system.slice/docker-compose@web.service\n", 2, None),
    # --- cgroup v1 (and hybrid: v1 controllers beside systemd's 0:: line)
    ("containerd on BottleRocket (hybrid, v2 line decides)",
     f"11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"dd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-{C1}.scope\n"
     f"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"dd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-{C1}.scope\n"
     f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"dd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-{C1}.scope\n",
     2, Container("containerd", C1, UID1, "besteffort")),
    ("CRI-O 1.19 on OpenShift 4.6 (v1)",
     f"12:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"8ca306fa_3c03_47fa_97dd_19979c345572.slice/crio-{C2}.scope\n"
     f"6:rdma:/\n"
     f"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"8ca306fa_3c03_47fa_97dd_19979c345572.slice/crio-{C2}.scope\n",
     1, Container("cri-o", C2, "8ca306fa-3c03-47fa-97dd-19979c345572", "besteffort")),
    ("containerd 1.4.4 without SystemdCgroup (v1: the cgroupsPath as one component)",
     f"11:pids:/system.slice/containerd.service/kubepods-besteffort-pod"
     f"2105e389_7471_476e_a50f_6074cef29bbd.slice:cri-containerd:{C4}\n"
     f"10:freezer:/kubepods-besteffort-pod2105e389_7471_476e_a50f_6074cef29bbd.slice:"
     f"cri-containerd:{C4}\n",
     1, Container("containerd", C4, "2105e389-7471-476e-a50f-6074cef29bbd", "besteffort")),
    ("Docker on CentOS (v1, systemd driver)",
     f"10:devices:/system.slice/docker-{C5}.scope\n"
     f"1:name=systemd:/system.slice/docker-{C5}.scope\n", 1, Container("docker", C5)),
    ("Docker on Ubuntu (v1, cgroupfs)",
     f"12:name=systemd:/docker/{C6}\n11:hugetlb:/docker/{C6}\n1:cpuset:/docker/{C6}\n", 1,
     Container("docker", C6)),
    ("v1 pids line alone", f"12:pids:/docker/{C6}\n", 1, Container("docker", C6)),
    ("docker in docker on RancherOS: the inner one",
     f"9:name=systemd:/docker/a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413"
     f"/docker/{C7}\n", 1, Container("docker", C7)),
    ("Kubernetes cgroupfs driver (v1): the runtime is not in the path",
     f"11:devices:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/{C8}\n"
     f"1:name=systemd:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/{C8}\n", 1,
     Container(None, C8, "74ba62da-1a3d-11e7-bb11-080027cb0e22", "besteffort")),
    ("kube-proxy's child cgroup under its container (v1)",
     f"9:pids:/kubepods/besteffort/podf8a694f2-7c08-11e9-98da-000c29077430/{C9}/kube-proxy\n",
     1, Container(None, C9, "f8a694f2-7c08-11e9-98da-000c29077430", "besteffort")),
    ("a host process (v1)", "13:name=systemd:/user/1000.user/c2.session\n12:pids:/\n", 1, None),
]


@pytest.mark.parametrize("name,text,version,container", CASES, ids=[c[0] for c in CASES])
def test_real_cgroup_lines(name, text, version, container):
    place = parse_proc_cgroup(text)
    assert place.version == version
    assert place.container == container


def test_the_path_kept_is_the_deciding_one():
    text = (f"12:pids:/docker/{C6}\n1:name=systemd:/docker/{C6}\n0::/\n")
    place = parse_proc_cgroup(text)
    assert (place.path, place.version, place.container.id) == (f"/docker/{C6}", 1, C6)
    host = parse_proc_cgroup("0::/system.slice/ssh.service\n")
    assert (host.path, host.version, host.container) == ("/system.slice/ssh.service", 2, None)
    assert parse_proc_cgroup("").path == ""
    assert parse_proc_cgroup("garbage\n::\n").container is None


def test_short_id_is_twelve_digits():
    assert container_of_path(f"/docker/{C6}").short == C6[:12]


@pytest.mark.parametrize("arg,want", [
    ("/sys/fs/cgroup/system.slice/docker-x.scope", "/system.slice/docker-x.scope"),
    ("system.slice/docker-x.scope/", "/system.slice/docker-x.scope"),
    ("/system.slice//docker-x.scope", "/system.slice/docker-x.scope"),
    ("/sys/fs/cgroup", "/"), ("/", "/"),
    ("/a/../b", None), ("", None), ("a\0b", None),
])
def test_cgroup_arg(arg, want):
    assert cgroup_arg(arg) == want


def test_in_cgroup_is_the_subtree_not_a_name_prefix():
    assert in_cgroup("/a/b", "/a") and in_cgroup("/a", "/a") and in_cgroup("/a/b/c", "/a/b")
    assert not in_cgroup("/ab", "/a") and not in_cgroup("/a", "/a/b")


@pytest.mark.parametrize("arg,want", [
    ("3F2a", "3f2a"), (C1, C1), (f"containerd://{C1}", C1), ("cri-o://d6d725b9", "d6d725b9"),
    ("docker://31cb", "31cb"), ("abc", None), ("xyz12", None), (C1 + "0", None), ("", None),
])
def test_container_prefix(arg, want):
    assert container_prefix(arg) == want
