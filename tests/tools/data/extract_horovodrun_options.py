#!/usr/bin/env python3
"""Prints horovodrun's options as tests/tools/data/horovodrun_options.txt lists them.

Reads Horovod's horovod/runner/launch.py (without importing Horovod) and lists, for every
add_argument call in parse_args() but the positional `command`, in the order of the source:
its dest, how many values it takes, its type, its argument group and its option strings.

    python3 extract_horovodrun_options.py path/to/horovod/runner/launch.py
"""
import ast
import sys


def main(path):
    tree = ast.parse(open(path).read())
    parse_args = next(n for n in tree.body
                      if isinstance(n, ast.FunctionDef) and n.name == 'parse_args')
    groups = {'parser': '-'}
    for node in ast.walk(parse_args):  # group variables, in order of assignment
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)):
            continue
        name, call = node.targets[0].id, node.value
        if call.func.attr == 'add_argument_group':
            groups[name] = call.args[0].value.replace(' ', '_')
        elif call.func.attr == 'add_mutually_exclusive_group':
            groups[name] = groups[call.func.value.id]
    calls = [n for n in ast.walk(parse_args) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == 'add_argument']
    for call in sorted(calls, key=lambda c: c.lineno):
        strings = [a.value for a in call.args]
        if not strings[0].startswith('-'):
            continue  # the positional command
        kw = {k.arg: k.value for k in call.keywords}
        action = ast.unparse(kw['action']) if 'action' in kw else "'store'"
        if 'nargs' in kw:
            nargs = ast.literal_eval(kw['nargs'])
        elif action in ("'store_true'", "'version'") or any(
                factory in action for factory in ('_true_action', '_false_action', 'bool_action')):
            nargs = 0  # flags, among them launch.py's make_override_{true,false}_action
        else:
            nargs = 1
        type_name = kw['type'].id if 'type' in kw else ('choices' if 'choices' in kw else 'str')
        dest = ast.literal_eval(kw['dest']) if 'dest' in kw else \
            strings[-1].lstrip('-').replace('-', '_')
        hidden = 'SUPPRESS' in ast.unparse(kw.get('help', ast.Constant('')))
        print('\t'.join([dest, str(nargs), type_name, groups[call.func.value.id],
                         'hidden' if hidden else 'listed'] + strings))


if __name__ == '__main__':
    main(sys.argv[1])
