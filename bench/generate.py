"""Synthetic raw documents in the real formats, for the benchmark.

N talks as a recorded snapshot (manifest.json + files): a gpu-mode/lectures
README with its tree, yt-dlp flat listings (GPU MODE uploads of the README's
lectures, other conference channels) and full info dicts (GTC re-uploads that
name their On-Demand URL), NVIDIA On-Demand session API answers and RainFocus
catalog pages. Sources overlap the way the real ones do: every README lecture
is also a video, a tenth of the GTC sessions are also on YouTube, half of the
catalog is also On-Demand.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

WORDS = ("cuda kernel warp tensor core memory bandwidth latency shared global cache tile pipeline "
         "async copy tma hopper blackwell ampere triton cutlass cute layout gemm attention flash softmax "
         "reduction scan sort histogram stencil convolution quantization fp8 fp4 int8 sparsity pruning "
         "inference training distributed nccl nvshmem collective allreduce pipeline parallel tensor "
         "sequence expert mixture compiler mlir llvm ptx sass occupancy register spill profiling nsight "
         "roofline graph stream event cooperative cluster multicast barrier fence atomics scheduling "
         "rocm hip sycl metal webgpu vulkan opencl jax xla pytorch compile inductor dynamo kernels "
         "fusion megakernel speculative decoding kv cache paged serving batching throughput").split()
FIRST = "Ada Alan Barbara Chen Dana Elena Farid Grace Hiro Ines Jamal Kenji Lena Mira Noor Omar Priya " \
        "Quinn Ravi Sara Tomas Uma Vera Wei Xin Yara Zane".split()
LAST = "Abe Brandt Cruz Dutta Eriksen Fujita Garcia Haddad Ivanova Jensen Kaur Lopez Moreau Nakamura " \
       "Okafor Petrov Qureshi Rossi Singh Tanaka Ueda Varga Weber Xu Yilmaz Zhou".split()
SYLLABLES = "ka ri to me na lo vi su de ra po ne ti mo ga be lu fi zo ha ce ku ol an er in us".split()


def vocabulary(size: int = 6000, seed: int = 3) -> list[str]:
    """Words for abstracts, most common first: plain pseudo-words, with the GPU
    terms at moderately common ranks, as in real abstracts."""
    rng = random.Random(seed)
    words: list[str] = []
    seen = set(WORDS)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    for rank, term in zip(range(40, 40 + 6 * len(WORDS), 6), WORDS):
        words.insert(rank, term)
    return words


VOCABULARY = vocabulary()
# Zipf's law: the word of rank r is used about 1/r as often as the commonest.
ZIPF_WEIGHTS = [1 / rank for rank in range(1, len(VOCABULARY) + 1)]
EVENTS = [("gtcspring21", "GTC Spring 2021"), ("gtcfall21", "GTC Fall 2021"), ("gtcspring22", "GTC Spring 2022"),
          ("gtcfall22", "GTC Fall 2022"), ("gtcspring23", "GTC Spring 2023"), ("gtc24", "GTC 2024"),
          ("gtc25", "GTC 2025"), ("gtc26", "GTC 2026")]
RECORDED = "2026-12-02T06:00:00Z"


@dataclass
class Plan:
    """How many items each source holds for N talks."""

    lectures: int
    sessions: int
    uploads: int  # GTC sessions also on YouTube
    catalog_dup: int
    catalog_only: int
    videos_only: int

    @classmethod
    def for_talks(cls, n: int) -> "Plan":
        lectures = max(20, n // 50)
        sessions = int(n * 0.35)
        catalog_only = n // 100
        return cls(lectures=lectures, sessions=sessions, uploads=sessions // 10, catalog_dup=n // 100,
                   catalog_only=catalog_only, videos_only=n - lectures - sessions - catalog_only)

    @property
    def talks(self) -> int:
        return self.lectures + self.sessions + self.catalog_only + self.videos_only


def _title(rng: random.Random, serial: int) -> str:
    words = rng.sample(WORDS, rng.randint(2, 4)) + rng.choices(VOCABULARY, ZIPF_WEIGHTS, k=rng.randint(1, 4))
    return " ".join(w.capitalize() if i == 0 else w for i, w in enumerate(words)) + f" {serial}"


def _name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _abstract(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, ZIPF_WEIGHTS, k=words)).capitalize() + "."


class SnapshotWriter:
    def __init__(self, directory: Path):
        self.directory = directory
        self.responses: list[dict] = []

    def add(self, source: str, url: str, relative: str, body: bytes, content_type: str,
            method: str = "GET", request_body: str | None = None) -> None:
        path = self.directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        entry = {"source": source, "method": method, "url": url, "status": 200, "content_type": content_type,
                 "fetched_at": RECORDED, "file": relative}
        if request_body is not None:
            entry["request_body"] = request_body
        self.responses.append(entry)

    def close(self) -> None:
        (self.directory / "manifest.json").write_text(json.dumps({"recorded": RECORDED,
                                                                  "responses": self.responses}))


def generate(n: int, directory: Path, seed: int = 7) -> tuple[Path, Plan]:
    """Write the snapshot for N talks; returns (the sources config path, the plan)."""
    rng = random.Random(seed)
    plan = Plan.for_talks(n)
    directory.mkdir(parents=True, exist_ok=True)
    out = SnapshotWriter(directory)
    serial = iter(range(10**9))

    # gpu-mode/lectures: README sections in the real shapes, and the tree.
    lectures = []
    sections = ["# Supplementary Material for Lectures\n"]
    tree = []
    for number in range(1, plan.lectures + 1):
        title, speakers = _title(rng, next(serial)), [_name(rng) for _ in range(rng.choice((1, 1, 1, 2)))]
        lectures.append((number, title, speakers))
        speaker_line = (f"- Speaker: [{speakers[0]}](https://github.com/{speakers[0].split()[0].lower()})"
                        if len(speakers) == 1 else f"Speakers: {' & '.join(speakers)}")
        folder = f"lecture_{number:03d}"
        sections.append(f"## Lecture {number}: {title}\n{speaker_line}\n"
                        f"- [Slides](https://docs.google.com/presentation/d/{number:08d}/edit)\n"
                        f"- Code in the [{folder}](./{folder}/) folder\n")
        tree += [{"path": folder, "type": "tree"}, {"path": f"{folder}/notebook.ipynb", "type": "blob", "size": 4096}]
    out.add("github", "https://api.github.com/repos/gpu-mode/lectures/readme", "github/readme.md",
            "\n".join(sections).encode(), "text/markdown; charset=utf-8")
    out.add("github", "https://api.github.com/repos/gpu-mode/lectures/git/trees/HEAD?recursive=1",
            "github/tree.json", json.dumps({"sha": "x", "truncated": False, "tree": tree}).encode(),
            "application/json")

    follows = []

    def listing(name: str, url: str, entries: list[dict], series: str, full_info: str = "never") -> None:
        body = {"_type": "playlist", "id": name, "title": name, "entries": entries}
        out.add("youtube", url, f"youtube/{name}.json", json.dumps(body).encode(), "application/json")
        follows.append({"url": url, "kind": "playlist", "series": series, "full_info": full_info})

    def entry(video_id: str, title: str, duration: int) -> dict:
        return {"_type": "url", "ie_key": "Youtube", "id": video_id, "title": title, "duration": duration,
                "url": f"https://www.youtube.com/watch?v={video_id}", "channel": "bench"}

    video_ids = iter(f"v{n:010d}" for n in range(10**9))
    # GPU MODE uploads of the README lectures: titles in YouTube's own wording.
    listing("gpumode", "https://www.youtube.com/@GPUMODE/videos",
            [entry(next(video_ids), f"Lecture {number}: {title}", rng.randint(1800, 9000))
             for number, title, _ in lectures], "GPU MODE")
    # Other channels, 1,000 videos a listing.
    remaining, channel = plan.videos_only, 0
    while remaining > 0:
        count = min(1000, remaining)
        listing(f"channel{channel:03d}", f"https://www.youtube.com/playlist?list=BENCH{channel:03d}",
                [entry(next(video_ids), _title(rng, next(serial)), rng.randint(600, 7200)) for _ in range(count)],
                "Conference")
        remaining -= count
        channel += 1

    # NVIDIA On-Demand sessions.
    sessions = []
    for index in range(plan.sessions):
        prefix, event = EVENTS[index % len(EVENTS)]
        slug = f"{prefix}-s{10000 + index}"
        title = _title(rng, next(serial))
        speakers = [_name(rng) for _ in range(rng.choice((1, 1, 2, 3)))]
        sessions.append((slug, title, event, speakers))
        body = {"sessionData": {
            "sessionID": slug.split("-")[1].upper(), "sTitle": title + " ",
            "sDate": None, "sLength": rng.choice((None, 25, 40, 50)),
            "sAbstract": _abstract(rng, rng.randint(40, 160)),
            "speakerList": [{"firstName": s.split()[0], "lastName": s.split()[1], "bio": None} for s in speakers],
            "attributes": [{"attribute": "event", "value": event},
                           {"attribute": "topic", "value": rng.choice(("HPC", "AI", "Graphics", "Data Science"))}],
            "assets": []}}
        out.add("gtc", f"https://api-prod.nvidia.com/services/nod/api/v1/session?id={slug}",
                f"gtc/session-{slug}.json", json.dumps(body).encode(), "application/json")

    # A tenth of them re-uploaded to YouTube, naming the On-Demand URL (full info recorded).
    uploads = []
    for slug, title, event, speakers in sessions[: plan.uploads]:
        video_id = next(video_ids)
        url = f"https://www.youtube.com/watch?v={video_id}"
        uploads.append(entry(video_id, f"{title} | {event}", rng.randint(1500, 3600)))
        info = {"id": video_id, "_type": "video", "title": f"{title} | {event}", "duration": uploads[-1]["duration"],
                "upload_date": "20240321", "description": f"www.nvidia.com/en-us/on-demand/session/{slug}/\n"
                + _abstract(rng, 60), "channel": "NVIDIA Developer", "webpage_url": url, "chapters": None}
        out.add("youtube", url, f"youtube/video-{video_id}.json", json.dumps(info).encode(), "application/json")
    listing("nvidia", "https://www.youtube.com/@NVIDIADeveloper/videos", uploads, "GTC", full_info="new")

    # The RainFocus catalog: pages of 500, half also On-Demand sessions.
    # Each with its session code and event code, as RainFocus sends them: they name the
    # On-Demand slug (gtc24 + S10005 = gtc24-s10005).
    catalog = [{"sessionID": f"rf{n:012d}", "code": slug.split("-")[1].upper(), "eventCode": slug.split("-")[0],
                "title": title, "abstract": None,
                "participants": [{"fullName": s, "globalBio": None} for s in speakers]}
               for n, (slug, title, event, speakers) in enumerate(
                   [s for s in sessions if s[2] == "GTC 2024"][: plan.catalog_dup])]
    catalog += [{"sessionID": f"rfonly{n:08d}", "code": f"S{900000 + n}", "eventCode": "gtc24",
                 "title": _title(rng, next(serial)), "abstract": None,
                 "participants": [{"fullName": _name(rng), "globalBio": None}]} for n in range(plan.catalog_only)]
    form = "type=session&browserTimezone=UTC&catalogDisplay=list"
    for page, start in enumerate(range(0, len(catalog), 500)):
        items = catalog[start:start + 500]
        body = ({"sectionList": [{"items": items, "total": len(catalog)}]} if start == 0
                else {"items": items, "total": len(catalog)})
        out.add("gtc", "https://events.rainfocus.com/api/search", f"gtc/rainfocus-{page}.json",
                json.dumps(body).encode(), "application/json", method="POST",
                request_body=form if start == 0 else f"{form}&from={start}")
    out.close()

    config = directory / "sources.toml"
    lines = ['[github]\nrepo = "gpu-mode/lectures"\n', '[youtube]\nfull_info = "never"\n']
    for follow in follows:
        lines.append("[[youtube.follow]]\n" + "".join(f'{k} = "{v}"\n' for k, v in follow.items()))
    lines.append("[gtc]\nrecheck_days = 1\nsessions = [\n" + "".join(f'  "{s[0]}",\n' for s in sessions) + "]\n")
    lines.append('[[gtc.catalogs]]\nevent = "GTC 2024"\nrfapiprofileid = "bench"\nrfwidgetid = "bench"\n'
                 "delay = 0\nmax_pages = 1000\n")
    config.write_text("\n".join(lines))
    return config, plan


def _timestamp(seconds: float) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{int(hours):02d}:{int(minutes):02d}:{secs:06.3f}"


def generate_transcripts(directory: Path, talks: int = 120, minutes: int = 75, seed: int = 5) -> tuple[dict, int]:
    """Talks with automatic English captions in YouTube's rolling WebVTT shape
    (each cue repeats the line before it, word timings in <c> tags), about 145
    words a minute. Returns (the youtube source config, words spoken)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    out = SnapshotWriter(directory)
    follows, spoken = [], 0
    for n in range(talks):
        video_id = f"t{n:010d}"
        track_url = f"https://www.youtube.com/api/timedtext?v={video_id}&lang=en&fmt=vtt&kind=asr"
        duration = minutes * 60
        chapters = [{"start_time": float(start), "end_time": float(min(start + 600, duration)),
                     "title": _title(rng, n * 100 + start // 600)} for start in range(0, duration, 600)]
        info = {"id": video_id, "_type": "video", "title": _title(rng, n), "duration": duration,
                "upload_date": "20250301", "description": _abstract(rng, 80), "channel": "bench",
                "chapters": chapters, "subtitles": {},
                "automatic_captions": {"en": [{"ext": "vtt", "url": track_url, "name": "English"}]}}
        url = f"https://www.youtube.com/watch?v={video_id}"
        out.add("youtube", url, f"youtube/video-{video_id}.json", json.dumps(info).encode(), "application/json")
        cues, previous, t = ["WEBVTT\nKind: captions\nLanguage: en\n"], "", 0.0
        while t < duration:
            words = rng.choices(VOCABULARY, ZIPF_WEIGHTS, k=7)
            spoken += len(words)
            end = t + 2.9
            timed = words[0] + "".join(f"<{_timestamp(t + 0.4 * (i + 1))}><c> {w}</c>" for i, w in enumerate(words[1:]))
            cues.append(f"{_timestamp(t)} --> {_timestamp(end)} align:start position:0%\n{previous}\n{timed}\n")
            previous = " ".join(words)
            cues.append(f"{_timestamp(end)} --> {_timestamp(end + 0.01)} align:start position:0%\n{previous}\n \n")
            t = end + 0.01
        out.add("youtube", track_url, f"youtube/captions-{video_id}.vtt", "\n".join(cues).encode(), "text/vtt")
        follows.append({"url": url, "kind": "video", "series": "Bench"})
    out.close()
    return {"youtube": {"follow": follows, "captions": {"enabled": True, "languages": ["en"]}}}, spoken
