<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use App\Support\BootHazards;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Support\Arr;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Redis;

/**
 * Reports what its handler process inherited (qpool's preload tests): its
 * process group and parent, what the random generators draw, its Redis
 * and database connections (and whether Redis replies came back to it
 * intact over $rounds round trips), what exec() sees of a child's exit,
 * whether the zygote's QPOOL_ZYGOTE_FD reached it or what it runs, and
 * whether OPcache and its JIT are on in it.
 */
class ForkProbeJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    public $rounds;

    public $sleepMs;

    public function __construct(?string $tag = null, int $rounds = 200, int $sleepMs = 0)
    {
        $this->tag = $tag;
        $this->rounds = $rounds;
        $this->sleepMs = $sleepMs;
    }

    public function handle()
    {
        $redis = Redis::connection();
        $crossed = 0;

        for ($i = 0; $i < $this->rounds; $i++) {
            $key = 'probe:'.getmypid().':'.$i;
            $redis->set($key, $key);

            if ($redis->get($key) !== $key) {
                $crossed++;
            }

            $redis->del($key);
        }

        usleep($this->sleepMs * 1000);
        exec('exit 3', $out, $rc);
        exec('printenv QPOOL_ZYGOTE_FD', $zygoteFd, $zygoteFdRc);
        $list = range(1, 20);
        shuffle($list);

        $this->marker([
            'pgid' => posix_getpgid(0),
            'ppid' => posix_getppid(),
            'mt_rand' => [mt_rand(), mt_rand(), mt_rand()],
            'rand' => rand(),
            'shuffle' => $list,
            'array_rand' => array_rand(array_flip(range(1, 1000)), 3),
            'arr_random' => Arr::random(range(1, 1000), 3),
            'str_shuffle' => str_shuffle('abcdefghijklmnopqrstuvwxyz'),
            'redis_id' => (int) $redis->client()->rawCommand('CLIENT', 'ID'),
            'boot_redis_id' => BootHazards::$bootRedisId,
            'crossed' => $crossed,
            'boot_pdo' => BootHazards::usesBootPdo(),
            'db_pid' => (int) DB::select('select ? as p', [getmypid()])[0]->p,
            'exec_rc' => $rc,
            'zygote_fd_env' => [getenv('QPOOL_ZYGOTE_FD'), $zygoteFdRc === 0],
            'opcache' => $this->opcache(),
        ]);
    }

    /** OPcache as this process runs it: [on, JIT on]. */
    private function opcache(): array
    {
        $status = function_exists('opcache_get_status') ? @opcache_get_status(false) : false;

        return [is_array($status) && ! empty($status['opcache_enabled']), is_array($status) && ! empty($status['jit']['on'])];
    }
}
