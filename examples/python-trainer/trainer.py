#!/usr/bin/env python3
"""A training-loop skeleton driving `relax-agentic serve` over its RPC, with only the Python standard library.

Start the rollout first (it prints the URL it listens on):

    npm run relax-agentic -- serve --config examples/arithmetic/rollout.json --rpc-port 8765

then run two steps, print reward statistics and bump the weight version after each:

    python3 examples/python-trainer/trainer.py --url http://127.0.0.1:8765/rpc --steps 2

The wire format (one JSON request per line, one JSON message per response line) is in docs/trainer.md.
"""

import argparse
import array
import base64
import hashlib
import itertools
import json
import os
import statistics
import sys
import urllib.error
import urllib.request


class RolloutError(RuntimeError):
    """A call the rollout could not answer; `kind` is the failure's tag (TooManyDroppedGroupsError, EngineError, ...)."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class RolloutClient:
    """The procedures of docs/trainer.md: Step, Groups (streamed), Evaluate, UpdateWeights, Status, Shutdown."""

    def __init__(self, url, token=None):
        self.url = url
        self.token = token
        self._ids = itertools.count(1)

    def _post(self, tag, payload):
        request_id = str(next(self._ids))
        line = json.dumps({"_tag": "Request", "id": request_id, "tag": tag, "payload": payload, "headers": []})
        headers = {"Content-Type": "application/x-ndjson"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        # No timeout: a step takes as long as its slowest agent.
        request = urllib.request.Request(self.url, data=(line + "\n").encode(), headers=headers, method="POST")
        try:
            response = urllib.request.urlopen(request)
        except urllib.error.HTTPError as error:
            raise RolloutError(f"HTTP {error.code}", error.read().decode(errors="replace")) from None
        return request_id, response

    @staticmethod
    def _value(exit_):
        if exit_["_tag"] == "Success":
            return exit_["value"]
        for reason in exit_["cause"]:
            if reason["_tag"] == "Fail":
                raise RolloutError(reason["error"]["kind"], reason["error"]["message"])
            if reason["_tag"] == "Die":
                raise RolloutError("Defect", str(reason["defect"]))
        raise RolloutError("Interrupted", "the call was interrupted")

    def _messages(self, tag, payload):
        request_id, response = self._post(tag, payload)
        with response:
            for line in response:
                if line.strip():
                    message = json.loads(line)
                    if message.get("requestId") == request_id:
                        yield message

    def call(self, tag, payload=None):
        """One request, its result."""
        for message in self._messages(tag, payload or {}):
            if message["_tag"] == "Exit":
                return self._value(message["exit"])
        raise RolloutError("Protocol", f"{tag}: the response ended without an Exit line")

    def stream(self, tag, payload=None):
        """A streamed request: its values as they arrive."""
        for message in self._messages(tag, payload or {}):
            if message["_tag"] == "Chunk":
                yield from message["values"]
            elif message["_tag"] == "Exit":
                self._value(message["exit"])
                return

    def step(self, rollout_id):
        return self.call("Step", {"rolloutId": rollout_id})

    def groups(self, steps=None, start=None):
        payload = {}
        if steps is not None:
            payload["steps"] = steps
        if start is not None:
            payload["from"] = start
        return self.stream("Groups", payload)

    def evaluate(self, rollout_id):
        return self.call("Evaluate", {"rolloutId": rollout_id})

    def update_weights(self, version=None):
        return self.call("UpdateWeights", {} if version is None else {"version": version})["weightVersion"]

    def pause_generation(self, mode=None):
        """First phase of a weight push done by the trainer: "abort" (default), "retract" or "in_place"."""
        self.call("PauseGeneration", {} if mode is None else {"mode": mode})

    def resume_generation(self, version=None):
        """Second phase: generation continues on `version` (default: SGLang's label after the push)."""
        return self.call("ResumeGeneration", {} if version is None else {"version": version})["weightVersion"]

    def publish_adapter(self, path, digest=None):
        """The LoRA form of a weight update (docs/lora.md): publish the adapter directory `path` (PEFT's
        save_pretrained output). Returns {"version", "id", "digest", "noOp"}; a path that is no adapter raises
        RolloutError before any worker is touched."""
        payload = {"path": path}
        if digest is not None:
            payload["digest"] = digest
        return self.call("PublishAdapter", payload)

    def status(self):
        return self.call("Status")

    def shutdown(self):
        return self.call("Shutdown")


def pixel_values(sample):
    """Each image's pixel_values of a vision sample, as ((rows, columns), array of float32), in image order.

    The RPC sends an array as {"dtype": "float32", "shape": [rows, columns], "data": <base64 of its little-endian
    bytes>} (docs/trainer.md "Binary arrays"); with NumPy: np.frombuffer(base64.b64decode(data), "<f4").reshape(shape).
    """
    decoded = []
    for entry in sample.get("multimodal_train_inputs", {}).get("pixel_values", []):
        values = array.array("f", base64.b64decode(entry["data"]))
        if sys.byteorder == "big":
            values.byteswap()
        rows, columns = entry["shape"]
        if len(values) != rows * columns:
            raise RolloutError("Protocol", f"pixel_values of shape {entry['shape']} hold {len(values)} values")
        decoded.append(((rows, columns), values))
    return decoded


def pixel_summary(samples):
    """Images, patch rows, and the SHA-256 of every image's float32 bytes (little-endian) in sample order."""
    digest = hashlib.sha256()
    images = rows = 0
    for sample in samples:
        for (count, _), values in pixel_values(sample):
            images += 1
            rows += count
            if sys.byteorder == "big":
                values.byteswap()
            digest.update(values.tobytes())
    return f"pixel_values: {images} images, {rows} rows, sha256 {digest.hexdigest()}"


def primary_reward(sample, reward_key):
    """The sample's scalar reward: the number itself, or the `reward_key` entry of a reward object."""
    reward = sample["reward"]
    if isinstance(reward, dict):
        reward = reward.get(reward_key) if reward_key else None
    return reward if isinstance(reward, (int, float)) else None


def reward_stats(samples, reward_key):
    rewards = [r for r in (primary_reward(s, reward_key) for s in samples) if r is not None]
    if not rewards:
        return "no numeric rewards"
    return (f"reward mean={statistics.fmean(rewards):.4f} std={statistics.pstdev(rewards):.4f} "
            f"min={min(rewards):g} max={max(rewards):g} n={len(rewards)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8765/rpc", help="the URL `relax-agentic serve` printed")
    parser.add_argument("--token", default=os.environ.get("RELAX_RPC_TOKEN"), help="the server's --rpc-token")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--reward-key", default="score", help="primary key of object rewards (--reward-key)")
    parser.add_argument("--groups", type=int, default=0, help="then stream this many more steps, Group by Group")
    parser.add_argument("--dump", help="write every step's samples to this JSON file")
    parser.add_argument("--pixel-values", action="store_true",
                        help="decode the vision samples' pixel_values and print their images, rows and digest")
    parser.add_argument("--shutdown", action="store_true", help="stop the server when done")
    parser.add_argument("--pause-mode", choices=["abort", "retract", "in_place"],
                        help="update the weights in two phases (PauseGeneration with this mode, the trainer's own "
                             "push, ResumeGeneration) instead of one UpdateWeights call")
    parser.add_argument("--adapters", nargs="+", metavar="DIR",
                        help="a LoRA trainer (serve with --lora-adapter-mode): publish the first adapter directory "
                             "before the first step and the next one after each step, instead of UpdateWeights")
    args = parser.parse_args()

    client = RolloutClient(args.url, args.token)
    status = client.status()
    print(f"rollout at {args.url}: engine={status['engine']} weight_version={status['weightVersion']}")
    start = 0 if status["lastRolloutId"] is None else status["lastRolloutId"] + 1
    adapters = list(args.adapters or [])
    if adapters:
        # Versioned LoRA needs a published version before the first Session generates.
        print(f"LoRA version -> {client.publish_adapter(adapters.pop(0))['version']}")
    steps = []
    for rollout_id in range(start, start + args.steps):
        result = client.step(rollout_id)
        samples = result["samples"]
        groups = result["groups"]
        print(f"step {rollout_id}: {len(samples)} samples from {groups['accepted']} Groups "
              f"({groups['dropped']} dropped, {groups['filtered']} filtered); {reward_stats(samples, args.reward_key)}")
        if args.pixel_values:
            print(pixel_summary(samples))
        # Train here: per sample, tokens[-response_length:] with loss_mask, rollout_log_probs and advantage (and a
        # vision model's multimodal_train_inputs: image_grid_thw and the pixel_values decoded above).
        if args.adapters is not None:
            # Save the trained adapter (peft's save_pretrained) to a new directory, then publish it.
            if adapters:
                print(f"LoRA version -> {client.publish_adapter(adapters.pop(0))['version']}")
            steps.append(result)
            continue
        if args.pause_mode is None:
            version = client.update_weights()
        else:
            client.pause_generation(args.pause_mode)
            # Push the new weights into SGLang here, with their version (update_weights_from_distributed /
            # _from_tensor / _from_disk with weight_version); then resume on it (None: SGLang's label after the push).
            version = client.resume_generation()
        print(f"weight version -> {version}")
        steps.append(result)
    for group in client.groups(steps=args.groups) if args.groups > 0 else []:
        print(f"step {group['rolloutId']} Group {group['groupIndex']}: {len(group['samples'])} samples; "
              f"{reward_stats(group['samples'], args.reward_key)}")
    if args.dump:
        with open(args.dump, "w") as out:
            json.dump(steps, out)
    if args.shutdown:
        client.shutdown()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RolloutError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except urllib.error.URLError as error:
        print(f"error: cannot reach the rollout RPC: {error.reason}; is `relax-agentic serve` running?", file=sys.stderr)
        sys.exit(1)
