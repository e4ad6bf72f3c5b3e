"""A fixture Laravel app whose database (its `database` queue, failed_jobs,
its migrations) is on a real MariaDB or PostgreSQL server (sqlservers.py):
DB_CONNECTION mysql or pgsql, as an app configured for either ships.
Laravel 13 runs in the sid root; the host's own Laravel (8 on Debian 12,
10 on Debian 13) on the host. Used by test_app_driver_sql.py and
test_app_driver_sql_chaos.py."""
import subprocess

import pytest

from laravel_roots import HOST_VERSIONS, VersionApp, mounted_version

# Laravel's jobs table (the `queue:table` migration) in each dialect
JOBS_DDL = {
    "mariadb": ["create table jobs (id bigint unsigned not null auto_increment primary key,"
                " queue varchar(255) not null, payload longtext not null, attempts tinyint unsigned not null,"
                " reserved_at int unsigned null, available_at int unsigned not null,"
                " created_at int unsigned not null, index jobs_queue_index (queue))"
                " default character set utf8mb4 collate utf8mb4_unicode_ci"],
    "postgres": ["create table jobs (id bigserial primary key, queue varchar(255) not null, payload text not null,"
                 " attempts smallint not null, reserved_at integer null, available_at integer not null,"
                 " created_at integer not null)",
                 "create index jobs_queue_index on jobs (queue)"],
}

HOST_VERSION = HOST_VERSIONS[0]


def versions():
    """Laravel 13 (sid root) and the host's own."""
    return ["13"] + ([HOST_VERSION] if HOST_VERSION != "13" else [])


class SqlApp(VersionApp):
    """A VersionApp whose default database connection is the server's."""

    DB_KEYS = ("DB_HOST", "DB_PORT", "DB_USERNAME", "DB_PASSWORD")

    def __init__(self, version, redis_port, host_tmp, server):
        super().__init__(version, redis_port, host_tmp)
        self.server = server
        self.env.update(server.laravel_env())

    def env_conf(self):
        conf = super().env_conf()
        extra = " ".join('%s = "%s";' % (k, self.env[k]) for k in self.DB_KEYS)
        return conf.replace("environment = {", "environment = { " + extra, 1)

    def failed_jobs(self):
        return self.server.query("select * from failed_jobs order by id")

    def jobs(self):
        return self.server.query("select id, attempts, reserved_at, available_at from jobs order by id")

    def make_jobs_table(self):
        for sql in JOBS_DDL[self.server.kind]:
            self.server.query(sql)


def use_sql_queue(app, retry_after=90):
    """A `database` queue connection on the app's default (SQL) connection."""
    conf = app.path / "config" / "queue.php"
    text = conf.read_text()
    text = text.replace("'connections' => [", "'connections' => [\n        'database' => ['driver' => 'database', "
                        "'table' => 'jobs', 'queue' => 'default', 'retry_after' => %d, 'after_commit' => false],"
                        % retry_after, 1)
    conf.write_text(text)
    app.make_jobs_table()


@pytest.fixture(scope="module", params=versions(), ids=lambda v: "laravel" + v)
def sql_version(request):
    yield from mounted_version(request.param)


PDO = {"mariadb": ("pdo_mysql", "php-mysql"), "postgres": ("pdo_pgsql", "php-pgsql")}


def require_pdo(version, kind):
    """Fail with the reason when the version's PHP lacks the server's PDO
    driver (a root scripts/laravel-root could not add it to, offline),
    rather than with Laravel's "could not find driver" later."""
    ext, pkg = PDO[kind]
    res = subprocess.run(version.prefix() + ["php", "-m"], capture_output=True, text=True, timeout=60)
    if ext not in res.stdout.split():
        where = ("the root %s (scripts/laravel-root could not add %s: offline?); remove it to rebuild it"
                 % (version.root, pkg)) if version.root else "the host (scripts/deps installs %s)" % pkg
        pytest.fail("Laravel %s: PHP has no %s in %s" % (version.name, ext, where), pytrace=False)


def make_sql_app(version, redis_server, tmp_path, server, retry_after=90):
    require_pdo(version, server.kind)
    app = SqlApp(version, redis_server.port, tmp_path, server)
    app.artisan("migrate", "--force")
    use_sql_queue(app, retry_after)
    return app
