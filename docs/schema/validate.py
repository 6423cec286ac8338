#!/usr/bin/env python3
"""Checks JSON lines on stdin against hammock's protocol schemas (JSON Schema draft 2020-12).

    hammock run config.yaml | python3 docs/schema/validate.py            # stdout lines
    python3 docs/schema/validate.py --control < my-control-lines.jsonl   # control lines

Each line that fails is printed with its number, the line itself and every reason, as soon as it is read, so
a live stream can be watched. Exits 0 when every line is valid, 1 when one is not, 2 when the checker itself
cannot run (no `jsonschema` module: `apt install python3-jsonschema` or `pip install jsonschema`).

--expect-invalid turns the check around, for testing the schemas themselves: every line must be rejected, and
the lines that are accepted are printed (exit 1).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = {
    "output": os.path.join(HERE, "output-line.schema.json"),
    "control": os.path.join(HERE, "control-line.schema.json"),
}


def parse_arguments():
    parser = argparse.ArgumentParser(description="Check hammock protocol lines (JSON lines on stdin) against the schemas.")
    parser.add_argument("--control", action="store_true", help="check control lines (stdin of hammock) instead of output lines")
    parser.add_argument("--schema", help="check against this schema file instead")
    parser.add_argument("--expect-invalid", action="store_true", help="every line must be rejected (tests the schemas)")
    return parser.parse_args()


def reasons(validator, value):
    """Every reason `value` fails, as readable text, each once."""
    errors = list(validator.iter_errors(value))
    found = []
    for error in errors:
        for text in explain(error, []):
            if text not in found:
                found.append(text)
    # Whether a line is valid is the validator's word alone; `explain` only words it.
    return found or [error.message for error in errors]


def explain(error, prefix):
    """The reasons behind `error`. A failed `oneOf` (line types, ops, `null` or an error object) is explained by
    the one branch that applies to the value, the one whose `type`, `op` or kind of value matched, rather than by
    a complaint per branch."""
    path = prefix + list(error.path)
    if error.validator == "oneOf":
        branches = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        applying = [subs for subs in branches.values() if not any(misses_branch(sub) for sub in subs)]
        if len(applying) == 1:
            return [text for sub in applying[0] for text in explain(sub, path)]
        if list(error.absolute_schema_path) == ["oneOf"]:
            return []  # no line type matched: the top level's own `type`, `required` and `enum` say why
        if "description" in error.schema:
            return ["at /%s: expected: %s" % ("/".join(str(part) for part in path), error.schema["description"])]
    message = error.message
    if error.validator == "not" and list(error.validator_value) == ["required"]:
        # `"not": {"required": [NAME]}`: a member this kind of line never has.
        path = path + error.validator_value["required"][:1]
        message = "not allowed here"
    return ["at /%s: %s" % ("/".join(str(part) for part in path), message)]


def misses_branch(error):
    """Whether `error` says the value is not this branch's kind at all: another JSON type, or another line type
    or op."""
    return (error.validator in ("type", "const", "enum") and not error.path) or list(error.path) in (["type"], ["op"])


def reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def main():
    arguments = parse_arguments()
    try:
        import jsonschema
    except ImportError:
        print("validate.py: the Python module jsonschema is missing: apt install python3-jsonschema "
              "(or pip install jsonschema)", file=sys.stderr)
        return 2
    path = arguments.schema or SCHEMAS["control" if arguments.control else "output"]
    with open(path, encoding="utf-8") as file:
        schema = json.load(file)
    validator_class = jsonschema.Draft202012Validator
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=jsonschema.FormatChecker())

    failed = 0
    accepted = []
    count = 0
    for number, line in enumerate(sys.stdin, start=1):
        line = line.rstrip("\n")
        count += 1
        try:
            value = json.loads(line, parse_constant=reject_constant)
            problems = reasons(validator, value)
        except ValueError as error:
            problems = ["not JSON: %s" % error]
        if arguments.expect_invalid:
            if not problems:
                accepted.append((number, line))
        elif problems:
            failed += 1
            print("line %d: %s" % (number, line), flush=True)
            for problem in problems:
                print("    " + problem, flush=True)

    if arguments.expect_invalid:
        for number, line in accepted:
            print("line %d was accepted, but should have been rejected: %s" % (number, line))
        print("%d lines, %d rejected as expected, %d accepted" % (count, count - len(accepted), len(accepted)))
        return 1 if accepted else 0
    print("%d lines, %d valid, %d invalid (%s)" % (count, count - failed, failed, os.path.basename(path)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
