# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""config_files: a role's files anywhere on the host in one step; only what differs, check and diff mode, what
changed named for handlers, bad input refused before anything is written."""

from __future__ import annotations

import os
import stat
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree
from fifo_guard import fifo_guard
from module_runner import run_module


def files_in(tmp_path):
    return [
        {'path': str(tmp_path / 'etc' / 'a.conf'), 'content': 'a = 1\n'},
        {'path': str(tmp_path / 'etc' / 'secret.d' / 'b.conf'), 'content': 'b = é\n', 'mode': '0600',
         'directory_mode': '0750'},
    ]


def mode_of(path) -> str:
    return oct(os.stat(path).st_mode & 0o777)


def test_first_run_writes_every_file_the_second_changes_nothing(tmp_path):
    (tmp_path / 'etc').mkdir()
    files = files_in(tmp_path)
    result = run_module('config_files', {'files': files})
    assert result['changed'] is True, result
    assert result['changed_files'] == [files[0]['path'], files[1]['path']]
    assert (tmp_path / 'etc' / 'a.conf').read_text(encoding='utf-8') == 'a = 1\n'
    assert (tmp_path / 'etc' / 'secret.d' / 'b.conf').read_text(encoding='utf-8') == 'b = é\n'
    assert mode_of(tmp_path / 'etc' / 'a.conf') == '0o644'
    assert mode_of(tmp_path / 'etc' / 'secret.d' / 'b.conf') == '0o600'
    assert mode_of(tmp_path / 'etc' / 'secret.d') == '0o750'
    again = run_module('config_files', {'files': files})
    assert again['changed'] is False and again['changed_files'] == []


def test_check_mode_names_the_drift_and_leaves_it_the_real_run_restores_only_that(tmp_path):
    (tmp_path / 'etc').mkdir()
    files = files_in(tmp_path)
    run_module('config_files', {'files': files})
    (tmp_path / 'etc' / 'a.conf').write_text('tampered\n', encoding='utf-8')
    os.chmod(tmp_path / 'etc' / 'secret.d' / 'b.conf', 0o644)
    check = run_module('config_files', {'files': files}, check=True)
    assert check['changed'] is True and check['changed_files'] == [files[0]['path'], files[1]['path']]
    assert (tmp_path / 'etc' / 'a.conf').read_text(encoding='utf-8') == 'tampered\n'
    assert mode_of(tmp_path / 'etc' / 'secret.d' / 'b.conf') == '0o644'
    result = run_module('config_files', {'files': files})
    assert result['changed_files'] == [files[0]['path'], files[1]['path']]
    assert (tmp_path / 'etc' / 'a.conf').read_text(encoding='utf-8') == 'a = 1\n'
    assert mode_of(tmp_path / 'etc' / 'secret.d' / 'b.conf') == '0o600'


def test_diff_shows_each_changed_file(tmp_path):
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'etc' / 'a.conf').write_text('a = 0\n', encoding='utf-8')
    files = files_in(tmp_path)[:1]
    result = run_module('config_files', {'files': files}, env={'ANSIBLE_DIFF_ALWAYS': '1'})
    assert result['diff'] == [{'before_header': files[0]['path'], 'after_header': files[0]['path'],
                               'before': 'a = 0\n', 'after': 'a = 1\n'}]


def test_check_mode_on_a_bare_host_writes_nothing(tmp_path):
    (tmp_path / 'etc').mkdir()
    files = files_in(tmp_path)
    result = run_module('config_files', {'files': files}, check=True)
    assert result['changed_files'] == [files[0]['path'], files[1]['path']]
    assert not (tmp_path / 'etc' / 'a.conf').exists() and not (tmp_path / 'etc' / 'secret.d').exists()


def test_a_missing_directory_without_directory_mode_fails_before_anything_is_written(tmp_path):
    (tmp_path / 'etc').mkdir()
    files = files_in(tmp_path)
    files[1] = dict(files[1], directory_mode=None)
    files[1].pop('directory_mode')
    result = run_module('config_files', {'files': files})
    assert result['failed'] is True
    assert result['msg'] == (f"files[1].path: the directory {tmp_path}/etc/secret.d of {files[1]['path']} does not exist "
                             '(set directory_mode to create it)')
    assert not (tmp_path / 'etc' / 'a.conf').exists()


@pytest.mark.parametrize('entry, message', [
    ({'path': 'etc/a.conf', 'content': ''}, "files[0].path: 'etc/a.conf' must be the absolute path of a file"),
    ({'path': '/etc/../a.conf', 'content': ''}, "files[0].path: '/etc/../a.conf' must not contain '.' or '..' parts"),
])
def test_bad_paths_are_refused_by_field(entry, message):
    with pytest.raises(_file_tree.FileTreeError, match=r'^' + message.replace('.', r'\.').replace('[', r'\[')
                       .replace(']', r'\]').replace('(', r'\(').replace(')', r'\)') + '$'):
        _file_tree.plan_files([entry])


def test_a_path_listed_twice_is_refused(tmp_path):
    entry = {'path': str(tmp_path / 'a.conf'), 'content': 'x\n'}
    with pytest.raises(_file_tree.FileTreeError, match=r'files\[1\]\.path: .* is listed twice'):
        _file_tree.plan_files([entry, entry])


def test_a_bad_mode_names_its_field(tmp_path):
    result = run_module('config_files', {'files': [{'path': str(tmp_path / 'a'), 'content': '', 'mode': 'rw'}]})
    assert result['failed'] is True and result['msg'] == "files[0].mode: 'rw' is not an octal mode such as '0644'"
    assert not (tmp_path / 'a').exists()


def test_directories_are_made_before_the_files_that_go_into_them(tmp_path):
    state, etc = tmp_path / 'var' / 'lib' / 'x', tmp_path / 'etc' / 'x'
    args = {'directories': [{'path': str(state), 'mode': '0700'}, {'path': str(etc)}],
            'files': [{'path': str(etc / 'x.json'), 'content': '{}\n'}]}
    check = run_module('config_files', args, check=True)
    assert check['changed_files'] == [str(state), str(etc), str(etc / 'x.json')] and not state.exists()
    result = run_module('config_files', args)
    assert result['changed_files'] == [str(state), str(etc), str(etc / 'x.json')]
    assert mode_of(state) == '0o700' and mode_of(etc) == '0o755' and (etc / 'x.json').read_text() == '{}\n'
    # The parents made for the 0700 directory are 0755.
    assert mode_of(tmp_path / 'var' / 'lib') == '0o755'
    os.chmod(state, 0o755)
    again = run_module('config_files', args)
    assert again['changed_files'] == [str(state)] and mode_of(state) == '0o700'
    assert run_module('config_files', args)['changed'] is False


def test_a_relative_directory_is_refused_by_field():
    result = run_module('config_files', {'directories': [{'path': 'var/lib/x'}]})
    assert result['failed'] is True and result['msg'] == "directories[0].path: 'var/lib/x' must be the absolute path of a directory"


def test_check_mode_counts_a_file_in_a_missing_directory_as_one_to_write(tmp_path):
    path = str(tmp_path / 'etc' / 'sssd' / 'sssd.conf')
    result = run_module('config_files', {'files': [{'path': path, 'content': 'x\n', 'mode': '0600'}]}, check=True)
    assert not result.get('failed') and result['changed_files'] == [path]
    assert not (tmp_path / 'etc').exists()


def test_absent_files_are_removed_and_named(tmp_path):
    old, kept = tmp_path / 'topology.conf', tmp_path / 'slurm.conf'
    old.write_text('x\n')
    args = {'files': [{'path': str(kept), 'content': 'y\n'}], 'absent': [str(old)]}
    check = run_module('config_files', args, check=True)
    assert check['changed_files'] == [str(kept), str(old)] and old.exists()
    assert run_module('config_files', args)['changed_files'] == [str(kept), str(old)] and not old.exists()
    assert run_module('config_files', args)['changed'] is False


def test_a_path_both_written_and_absent_is_refused(tmp_path):
    path = str(tmp_path / 'a.conf')
    result = run_module('config_files', {'files': [{'path': path, 'content': ''}], 'absent': [path]})
    assert result['failed'] is True and result['msg'] == f'absent: {path} is also one of files'
    assert not (tmp_path / 'a.conf').exists()


def test_validate_checks_the_new_content_before_any_file_is_written(tmp_path):
    (tmp_path / 'etc').mkdir()
    # grep -q a: the content must hold an "a" (a stand-in for nft -c or sshd -t), run on a temporary copy.
    files = [dict(files_in(tmp_path)[0], validate='grep -q a %s'), files_in(tmp_path)[1]]
    result = run_module('config_files', {'files': files})
    assert result['changed_files'] == [files[0]['path'], files[1]['path']]
    assert (tmp_path / 'etc' / 'a.conf').read_text(encoding='utf-8') == 'a = 1\n'
    # New content the command refuses: the task fails naming the file and the command; neither file is touched.
    refused = [dict(files[0], content='nonsense\n'), dict(files[1], content='b = 2\n')]
    result = run_module('config_files', {'files': refused})
    assert result['failed'] is True
    assert result['msg'].startswith(f"files[0]: the new content of {files[0]['path']} fails 'grep -q a %s' (rc 1)")
    assert (tmp_path / 'etc' / 'a.conf').read_text(encoding='utf-8') == 'a = 1\n'
    assert (tmp_path / 'etc' / 'secret.d' / 'b.conf').read_text(encoding='utf-8') == 'b = é\n'
    # Unchanged content is not validated again; check mode validates nothing.
    assert run_module('config_files', {'files': [dict(files[0], validate='false %s')]})['changed'] is False
    check = run_module('config_files', {'files': [dict(refused[0], validate='false %s')]}, check=True)
    assert check['changed_files'] == [files[0]['path']] and not check.get('failed')


def test_validate_must_name_the_file(tmp_path):
    (tmp_path / 'etc').mkdir()
    files = [dict(files_in(tmp_path)[0], validate='true')]
    result = run_module('config_files', {'files': files})
    assert result['failed'] is True and result['msg'] == "files[0].validate: 'true' must contain %s (the file to check)"
    assert not (tmp_path / 'etc' / 'a.conf').exists()
    # Refused as input, whether or not the content would change.
    (tmp_path / 'etc' / 'a.conf').write_text(files[0]['content'], encoding='utf-8')
    again = run_module('config_files', {'files': files})
    assert again['failed'] is True and again['msg'] == "files[0].validate: 'true' must contain %s (the file to check)"


# Writing files as root: the module does what Ansible's own file modules do.

@pytest.mark.parametrize('mode, expected', [
    pytest.param(420, '0o644', id='unquoted-0644-arrives-as-420'),
    pytest.param(0o600, '0o600', id='int-as-is'),
    pytest.param('644', '0o644', id='three-digits'),
    pytest.param('0640', '0o640', id='four-digits'),
])
def test_a_mode_is_read_as_ansible_reads_it(tmp_path, mode, expected):
    path = tmp_path / 'a.conf'
    result = run_module('config_files', {'files': [{'path': str(path), 'content': 'x\n', 'mode': mode}]})
    assert not result.get('failed'), result
    assert mode_of(path) == expected


def test_an_int_directory_mode_is_taken_as_is(tmp_path):
    state = tmp_path / 'state'
    result = run_module('config_files', {'directories': [{'path': str(state), 'mode': 448}]})
    assert not result.get('failed'), result
    assert mode_of(state) == '0o700'


@pytest.mark.parametrize('mode', ['-644', '77777777', '8', '', '0o644', 0o10000, -1, True])
def test_a_mode_out_of_form_or_range_is_refused_naming_entry_and_field(tmp_path, mode):
    path = tmp_path / 'a.conf'
    result = run_module('config_files', {'files': [{'path': str(tmp_path / 'ok.conf'), 'content': ''},
                                                   {'path': str(path), 'content': 'x\n', 'mode': mode}]})
    assert result.get('failed') is True and result['msg'].startswith('files[1].mode: '), result
    assert not path.exists() and not (tmp_path / 'ok.conf').exists()


@pytest.mark.parametrize('value', ['1777', '644', '0000', 0, 420, 0o7777])
def test_octal_mode_accepts_three_or_four_octal_digits_and_ints_in_range(value):
    expected = int(value, 8) if isinstance(value, str) else value
    assert _file_tree.octal_mode(value, 'files[0].mode') == expected


def test_a_leading_double_slash_is_the_same_path_for_both_guards(tmp_path):
    path = str(tmp_path / 'a.conf')
    result = run_module('config_files', {'files': [{'path': path, 'content': 'x\n'}], 'absent': ['/' + path]})
    assert result['failed'] is True and result['msg'] == f'absent: {path} is also one of files'
    assert not (tmp_path / 'a.conf').exists()
    twice = run_module('config_files', {'files': [{'path': path, 'content': 'x\n'},
                                                  {'path': '//' + path.lstrip('/'), 'content': 'y\n'}]})
    assert twice['failed'] is True and twice['msg'] == f"files[1].path: '{path}' is listed twice"
    assert not (tmp_path / 'a.conf').exists()


def test_paths_are_normalised_before_use(tmp_path):
    (tmp_path / 'etc').mkdir()
    path = tmp_path / 'etc' / 'a.conf'
    spelled = '/' + str(tmp_path / 'etc') + '//a.conf'
    result = run_module('config_files', {'files': [{'path': spelled, 'content': 'x\n'}]})
    assert result['changed_files'] == [str(path)] and path.read_text(encoding='utf-8') == 'x\n'


def test_a_relative_absent_path_is_refused(tmp_path):
    result = run_module('config_files', {'absent': ['etc/a.conf']})
    assert result['failed'] is True and result['msg'] == "absent[0]: 'etc/a.conf' must be the absolute path of a file"


@pytest.mark.parametrize('check', [False, True], ids=['real', 'check'])
def test_a_symlink_at_a_destination_is_replaced_without_reading_its_target(tmp_path, check):
    secret = tmp_path / 'shadow'
    secret.write_text('root:$6$secret-hash:19000::::::\n', encoding='utf-8')
    os.chmod(secret, 0o600)
    link = tmp_path / 'a.conf'
    link.symlink_to(secret)
    result = run_module('config_files', {'files': [{'path': str(link), 'content': 'a = 1\n'}]}, check=check,
                        env={'ANSIBLE_DIFF_ALWAYS': '1'})
    assert not result.get('failed'), result
    assert 'secret-hash' not in repr(result)
    assert result['changed_files'] == [str(link)]
    assert [(entry['before'], entry['after']) for entry in result['diff']] == [('', 'a = 1\n')]
    assert secret.read_text(encoding='utf-8') == 'root:$6$secret-hash:19000::::::\n' and mode_of(secret) == '0o600'
    if check:
        assert link.is_symlink()
    else:
        assert not link.is_symlink() and link.read_text(encoding='utf-8') == 'a = 1\n' and mode_of(link) == '0o644'


def test_a_fifo_at_a_destination_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / 'a.conf'
    os.mkfifo(fifo)
    started = time.monotonic()
    with fifo_guard(fifo, 20):
        result = run_module('config_files', {'files': [{'path': str(tmp_path / 'b.conf'), 'content': 'b\n'},
                                                       {'path': str(fifo), 'content': 'a\n'}]})
    assert time.monotonic() - started < 20, 'the module blocked on the FIFO'
    assert result['failed'] is True
    assert result['msg'] == f'files[1].path: {fifo} is a FIFO where a file belongs'
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (tmp_path / 'b.conf').exists()


def test_plan_files_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / 'a.conf'
    os.mkfifo(fifo)
    started = time.monotonic()
    with fifo_guard(fifo, 5), pytest.raises(_file_tree.FileTreeError, match='is a FIFO'):
        _file_tree.plan_files([{'path': str(fifo), 'content': ''}])
    assert time.monotonic() - started < 5


def test_an_existing_file_keeps_its_owner_and_group_when_they_are_omitted(tmp_path):
    path = tmp_path / 'a.conf'
    path.write_text('old\n', encoding='utf-8')
    os.chown(path, 65534, 65534)
    result = run_module('config_files', {'files': [{'path': str(path), 'content': 'new\n'}]})
    assert result['changed_files'] == [str(path)] and path.read_text(encoding='utf-8') == 'new\n'
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)
    # Only the group asked for changes; a new file is the process's.
    run_module('config_files', {'files': [{'path': str(path), 'content': 'newer\n', 'group': str(os.getgid())},
                                          {'path': str(tmp_path / 'b.conf'), 'content': ''}]})
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, os.getgid())
    assert ((tmp_path / 'b.conf').stat().st_uid, (tmp_path / 'b.conf').stat().st_gid) == (os.getuid(), os.getgid())


@pytest.mark.parametrize('check', [False, True], ids=['real', 'check'])
@pytest.mark.parametrize('field, value, message', [
    ('owner', 'no-such-user-42', "files[1].owner: no user 'no-such-user-42' on this host"),
    ('group', 'no-such-group-42', "files[1].group: no group 'no-such-group-42' on this host"),
])
def test_an_unknown_owner_or_group_is_refused_before_anything_is_written(tmp_path, check, field, value, message):
    first, second = tmp_path / 'a.conf', tmp_path / 'b.conf'
    result = run_module('config_files', {'files': [{'path': str(first), 'content': 'a\n'},
                                                   {'path': str(second), 'content': 'b\n', field: value}]}, check=check)
    assert result.get('failed') is True and result['msg'] == message, result
    assert not first.exists() and not second.exists()


def test_an_unknown_directory_owner_is_refused_before_anything_is_made(tmp_path):
    result = run_module('config_files', {'directories': [{'path': str(tmp_path / 'd'), 'owner': 'no-such-user-42'}]})
    assert result.get('failed') is True
    assert result['msg'] == "directories[0].owner: no user 'no-such-user-42' on this host"
    assert not (tmp_path / 'd').exists()


def test_existing_content_that_is_not_utf8_is_rewritten(tmp_path):
    path = tmp_path / 'a.conf'
    path.write_bytes(b'\xff\xfe binary\n')
    args = {'files': [{'path': str(path), 'content': ''}]}
    result = run_module('config_files', args, env={'ANSIBLE_DIFF_ALWAYS': '1'})
    assert result['changed_files'] == [str(path)] and path.read_bytes() == b''
    assert result['diff'][0]['before'] == '\ufffd\ufffd binary\n'
    assert run_module('config_files', args)['changed'] is False
